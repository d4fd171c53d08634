"""``ductwork demo``: the sandbox upstream, a full sync, the read API and the Dagster UI."""

from __future__ import annotations

import argparse
import sys

from pipelines.commands.arguments import Subcommands, writes_data_folder
from pipelines.commands.sandbox_upstream import SANDBOX_MISSING


def add(sub: Subcommands) -> None:
    """``ductwork demo``."""
    demo = sub.add_parser("demo", help="Sandbox upstream, full sync, read API and Dagster UI.")
    demo.add_argument("--scale", default="small", choices=["tiny", "small", "medium", "large"])
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--api-port", type=int, default=8080)
    demo.add_argument("--ui-port", type=int, default=3000)
    demo.add_argument("--sandbox-port", type=int, default=8900)
    demo.add_argument("--s3-port", type=int, default=8901)
    demo.add_argument("--no-ui", action="store_true", help="Skip the Dagster UI.")
    demo.add_argument(
        "--exit-after-sync", action="store_true", help="Stop once the API has answered."
    )
    demo.set_defaults(run=run)
    writes_data_folder(demo)


def run(options: argparse.Namespace) -> int:
    """Run the demo until stopped (or once the API has answered)."""
    from importlib.util import find_spec

    if find_spec("sandbox") is None:
        print(SANDBOX_MISSING, file=sys.stderr)
        return 2
    from pipelines.demo import run_demo

    return run_demo(options)
