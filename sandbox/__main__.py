"""``python -m sandbox``: the same as ``ductwork sandbox``."""

import sys

from sandbox.server import main

sys.exit(main())
