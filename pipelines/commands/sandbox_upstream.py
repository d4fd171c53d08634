"""``ductwork sandbox``: the sandbox upstream, whose own parser reads the arguments
(``pipelines.cli`` hands them over before ``ductwork``'s parser sees them)."""

from __future__ import annotations

import sys

from pipelines.commands.arguments import Subcommands

# The sandbox (and so the demo) ships with the repository, not with the installed package.
SANDBOX_MISSING = "ductwork: the sandbox upstream comes with the repository; run from a checkout"


def add(sub: Subcommands) -> None:
    """``ductwork sandbox``, listed in the help only."""
    sub.add_parser("sandbox", help="Start the sandbox upstream (see: ductwork sandbox --help).")


def run(args: list[str]) -> int:
    """Run the sandbox upstream with its own arguments ``args``."""
    try:
        from sandbox.server import main as sandbox_main
    except ModuleNotFoundError:
        print(SANDBOX_MISSING, file=sys.stderr)
        return 2
    return sandbox_main(args) or 0
