"""The ``ductwork`` command: parses the arguments (``pipelines.commands``) and runs the
subcommand they name, with the process-wide rules every command shares."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ductwork import file_modes
from ductwork.output_files import DestinationRefused
from ductwork.settings import HomeSettings, SettingsError, load
from pipelines import commands
from pipelines.commands import sandbox_upstream
from pipelines.usage import UsageError


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["sandbox"]:
        return sandbox_upstream.run(args[1:])
    parser = commands.parser(_version())
    options = parser.parse_args(args)
    if options.command is None:
        parser.print_help()
        return 2
    # Declared by the subcommand's module (``commands.arguments.writes_data_folder``).
    runs_a_job = argv is None and getattr(options, "runs_a_job", False)
    try:
        # Whatever a command creates (DuckDB, SQLite and Dagster files included) is private.
        file_modes.current().apply_umask()
        if getattr(options, "writes_data_folder", False):
            file_modes.secure_home(load(HomeSettings).home)
        if runs_a_job:
            # Loading Dagster, the definitions and the instance creates objects by the hundred
            # thousand, and each threshold crossed set off a collection that scanned them all
            # again: a fifth of the start-up of a run with nothing to sync. Nothing loaded is
            # garbage; the run turns collections back on once it has frozen what is loaded
            # (``pipelines.sync_command.freeze_what_is_loaded``).
            gc.disable()
        code = options.run(options)
    except (SettingsError, UsageError, DestinationRefused) as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if runs_a_job:
        _end_process(code)  # only as the process's entry point, never for a caller in-process
    return code


def _end_process(code: int) -> NoReturn:
    """Exit with ``code`` now, skipping the interpreter's finalisation.

    A run leaves Dagster, DuckDB, Arrow and the upstream client loaded, and freeing them object
    by object as the interpreter finalises took a third of a run with nothing to sync.
    By now the run has closed what it wrote (its resources closed the warehouse, the instance
    its databases); the exit handlers still run and the output is flushed first.
    """
    try:
        atexit._run_exitfuncs()  # the handlers ``sys.exit`` would have run
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ductwork")
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
