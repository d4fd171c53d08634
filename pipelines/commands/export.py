"""``ductwork export``: every table and view of the current snapshot as Parquet."""

from __future__ import annotations

import argparse

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands


def add(sub: Subcommands) -> None:
    """``ductwork export``."""
    export = sub.add_parser("export", help="Every table and view of the snapshot as Parquet.")
    export.add_argument("--to", required=True, metavar="DIR|s3://BUCKET/PREFIX")
    export.add_argument(
        "--force",
        action="store_true",
        help="Write into a folder that is not empty, replacing regular files of the same names "
        "(never a symlink or a folder).",
    )
    export.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Write the export."""
    from pipelines.export import run_export

    return run_export(options.to, load(HomeSettings), force=options.force)
