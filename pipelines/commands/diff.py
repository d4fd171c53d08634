"""``ductwork diff``: what changed in the streams between two instants."""

from __future__ import annotations

import argparse

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import STREAM_NAMES, Subcommands


def add(sub: Subcommands) -> None:
    """``ductwork diff``."""
    diff = sub.add_parser(
        "diff", help="What changed in the streams between two instants (or snapshot versions)."
    )
    diff.add_argument("--from", dest="before", required=True, metavar="INSTANT")
    diff.add_argument("--to", dest="after", required=True, metavar="INSTANT")
    diff.add_argument("--stream", default=None, help=f"One of: {STREAM_NAMES} (default: all).")
    diff.add_argument("--format", choices=["table", "json"], default="table")
    diff.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Print the differences."""
    from pipelines.history_commands import run_diff

    return run_diff(
        options.before, options.after, options.stream, options.format,
        load(HomeSettings).snapshots_dir,
    )  # fmt: skip
