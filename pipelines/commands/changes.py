"""``ductwork changes``: a stream's changes feed as NDJSON."""

from __future__ import annotations

import argparse

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import STREAM_NAMES, Subcommands
from pipelines.usage import UsageError


def add(sub: Subcommands) -> None:
    """``ductwork changes``."""
    changes = sub.add_parser(
        "changes",
        help="A stream's changes as NDJSON (every record without --since); the next token on "
        "stderr.",
    )
    changes.add_argument("stream", help=f"One of: {STREAM_NAMES}.")
    changes.add_argument("--since", default=None, metavar="TOKEN", help="A token printed before.")
    changes.add_argument(
        "--limit", type=int, default=1000, help="Changes read per page (1 to 10000)."
    )
    changes.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Print the stream's changes since the token."""
    from pipelines.history_commands import run_changes

    if not 1 <= options.limit <= 10_000:
        raise UsageError("--limit must be 1 to 10000")
    return run_changes(
        options.stream, options.since, options.limit, load(HomeSettings).snapshots_dir
    )
