"""What the subcommands' arguments share: the type argparse hands them, the stream names their
help texts list, the ``--force`` option of the commands that write a file."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from ductwork.streams.registry import STREAMS

# The stream names the help texts list.
STREAM_NAMES = ", ".join(stream.name for stream in STREAMS)

# The subcommands of ``ductwork``, as argparse hands them out.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_force_option(command: argparse.ArgumentParser) -> None:
    """``--force``: replace the output file if it is a regular file."""
    command.add_argument(
        "--force",
        action="store_true",
        help="Replace the file if it is a regular file (never a symlink or a folder).",
    )


def writes_data_folder(command: argparse.ArgumentParser, *, runs_a_job: bool = False) -> None:
    """Mark ``command`` as one that writes the data folder (directly or through the Dagster
    processes it starts), so that the folder is first brought to the file-mode rule; and, with
    ``runs_a_job``, as one that runs a Dagster job in this process (``pipelines.cli``)."""
    command.set_defaults(writes_data_folder=True, runs_a_job=runs_a_job)
