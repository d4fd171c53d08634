"""``ductwork forget``: erase records holding personal data from every version of the mirror."""

from __future__ import annotations

import argparse

from ductwork.streams.registry import personal_streams
from pipelines.commands.arguments import Subcommands, writes_data_folder


def add(sub: Subcommands) -> None:
    """``ductwork forget``."""
    forget = sub.add_parser(
        "forget",
        help="Erase records holding personal data from the mirror's every version, then "
        "publish a snapshot without them.",
    )
    personal = ", ".join(stream.name for stream in personal_streams())
    forget.add_argument("stream", help=f"A stream with personal data: {personal}.")
    forget.add_argument("keys", nargs="+", metavar="KEY", help="The records' keys.")
    forget.add_argument("--reason", default=None, help="Why (kept in the audit log).")
    forget.add_argument(
        "--suppress",
        action="store_true",
        help="Erase even a record the upstream still serves, and keep it out of every later "
        "sync until --lift.",
    )
    forget.add_argument(
        "--lift", action="store_true", help="Lift the suppression: the next sync brings it back."
    )
    forget.add_argument(
        "--verbose", action="store_true", help="Also print Dagster's whole event stream."
    )
    forget.set_defaults(run=run)
    writes_data_folder(forget, runs_a_job=True)


def run(options: argparse.Namespace) -> int:
    """Erase the records, then publish; the exit code."""
    from pipelines.forget_command import run_forget

    return run_forget(
        options.stream, options.keys, options.reason, suppress=options.suppress,
        lift=options.lift, verbose=options.verbose,
    )  # fmt: skip
