"""``ductwork sync``: sync from the upstream through Dagster, then publish."""

from __future__ import annotations

import argparse

from ductwork.streams.registry import STREAMS
from pipelines.commands.arguments import STREAM_NAMES, Subcommands, writes_data_folder


def add(sub: Subcommands) -> None:
    """``ductwork sync``."""
    resumable = ", ".join(stream.name for stream in STREAMS if stream.resumable)
    sync = sub.add_parser("sync", help="Sync from the upstream through Dagster, then publish.")
    sync.add_argument(
        "--select",
        action="append",
        metavar="ASSET",
        help="Asset name or group:NAME; repeatable (default: everything).",
    )
    sync.add_argument("--no-publish", action="store_true", help="Do not publish a snapshot.")
    sync.add_argument(
        "--verbose", action="store_true", help="Also print Dagster's whole event stream."
    )
    sync.add_argument(
        "--reconcile",
        action="store_true",
        help="Full listings: deletions detected, every record re-read.",
    )
    sync.add_argument(
        "--full-refresh",
        action="append",
        metavar="STREAM",
        help=f"Re-read this stream from scratch (resume point forgotten, deletions detected); "
        f"repeatable; adds the stream to the selection. Streams: {STREAM_NAMES}.",
    )
    sync.add_argument(
        "--reset",
        action="append",
        metavar="STREAM",
        help=f"Forget the stream's resume point, then sync it incrementally from the start; "
        f"repeatable. Streams with one: {resumable}.",
    )
    # The flag's name before the glossary called it a resume point; still accepted.
    sync.add_argument("--reset-bookmark", dest="reset", action="append", help=argparse.SUPPRESS)
    sync.set_defaults(run=run)
    writes_data_folder(sync, runs_a_job=True)


def run(options: argparse.Namespace) -> int:
    """Run the sync the options ask for; its exit code."""
    from pipelines.sync_command import run_sync

    outcome = run_sync(
        options.select,
        publish=not options.no_publish,
        reconcile=options.reconcile,
        full_refresh=options.full_refresh,
        reset=options.reset,
        verbose=options.verbose,
    )
    return outcome.exit_code
