"""The ``ductwork`` command."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ductwork import file_modes
from ductwork.keys import ALL_SCOPES, GRANTABLE_SCOPES, STREAM_SCOPE_PREFIX, KeyFile
from ductwork.output_files import DestinationRefused
from ductwork.settings import (
    HomeSettings,
    ServeSettings,
    SettingsError,
    SnapshotStoreSettings,
    load,
)
from pipelines import cli_parser
from pipelines.usage import UsageError

# The sandbox (and so the demo) ships with the repository, not with the installed package.
SANDBOX_MISSING = "ductwork: the sandbox upstream comes with the repository; run from a checkout"
# The commands that write the data folder (directly or through the Dagster processes they
# start): each first brings the folder to the file-mode rule.
WRITES_DATA_FOLDER = {"sync", "run-job", "dev", "demo", "subscriptions", "forget"}
# The commands that run a job in this process: as a process of their own, they end without
# tearing the interpreter down (see ``_end_process``).
RUNS_A_JOB = {"sync", "run-job", "forget"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["sandbox"]:
        try:
            from sandbox.server import main as sandbox_main
        except ModuleNotFoundError:
            print(SANDBOX_MISSING, file=sys.stderr)
            return 2
        return sandbox_main(args[1:]) or 0
    parser = cli_parser.parser(_version())
    options = parser.parse_args(args)
    if options.command is None:
        parser.print_help()
        return 2
    try:
        # Whatever a command creates (DuckDB, SQLite and Dagster files included) is private.
        file_modes.current().apply_umask()
        if options.command in WRITES_DATA_FOLDER:
            file_modes.secure_home(load(HomeSettings).home)
        if argv is None and options.command in RUNS_A_JOB:
            # Loading Dagster, the definitions and the instance creates objects by the hundred
            # thousand, and each threshold crossed set off a collection that scanned them all
            # again: a fifth of the start-up of a run with nothing to sync. Nothing loaded is
            # garbage; the run turns collections back on once it has frozen what is loaded
            # (``pipelines.sync_command.freeze_what_is_loaded``).
            gc.disable()
        code = HANDLERS[options.handler](options)
    except (SettingsError, UsageError, DestinationRefused) as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if argv is None and options.command in RUNS_A_JOB:
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


def _sync(options: argparse.Namespace) -> int:
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


def _run_job(options: argparse.Namespace) -> int:
    from pipelines.sync_command import run_job

    outcome = run_job(options.job, publish=False, run_id=options.run_id, verbose=options.verbose)
    return outcome.exit_code


def _serve(options: argparse.Namespace) -> int:
    import shutil
    import tempfile

    import uvicorn

    settings = load(ServeSettings)
    load(HomeSettings)
    load(SnapshotStoreSettings)  # a malformed store URL stops here, in one line
    workers = options.workers or settings.serve_workers
    metrics_dir = None
    if workers > 1:
        # The workers' metric files, summed by /metrics. Local to this machine, not under the
        # data folder: several read-API hosts may share that folder, and their pids collide.
        # prometheus_client reads the variable at import, so it is set before workers start.
        metrics_dir = tempfile.mkdtemp(prefix="ductwork-serve-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    else:
        # One process keeps its metrics in memory; an inherited variable would point it at
        # files other processes may have written.
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    # Imported only now: it imports prometheus_client, which the one-worker server runs in.
    from serve.observability import serve_logging_config
    from serve.worker_processes import run_server, serve_with_workers

    config = uvicorn.Config(
        "serve.app:create_app",
        factory=True,
        host=options.host or settings.serve_host,
        port=settings.serve_port if options.port is None else options.port,
        workers=workers,
        loop="uvloop",
        # httptools with a size and a time limit on every request's line and headers.
        http="serve.request_heads:BoundedHttpToolsProtocol",
        log_config=serve_logging_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,  # the app's JSON access log replaces uvicorn's
        # The app believes X-Forwarded-For from DUCTWORK_TRUSTED_PROXIES only; uvicorn's own
        # handling would believe it from any loopback peer.
        proxy_headers=False,
    )
    try:
        if workers > 1:
            return serve_with_workers(config, workers)
        return run_server(config)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _key_store() -> KeyFile:
    return KeyFile(load(HomeSettings).keys_path)


def _keys_create(options: argparse.Namespace) -> int:
    if not options.scope:
        scopes = "|".join([*GRANTABLE_SCOPES, ALL_SCOPES, f"{STREAM_SCOPE_PREFIX}STREAM"])
        print(f"ductwork: keys create needs at least one --scope {scopes}", file=sys.stderr)
        return 2
    try:
        key = _key_store().create(options.name, options.scope)
    except ValueError as exc:  # an unknown scope: refused before the key file is touched
        print(f"ductwork: keys create: {exc}", file=sys.stderr)
        return 2
    print(f"Created key {options.name!r}; it is shown once and stored only as a hash:")
    print(key)
    return 0


def _keys_list(options: argparse.Namespace) -> int:
    for entry in _key_store().entries():
        state = "active" if entry.active else f"revoked {entry.revoked_at}"
        print(f"{entry.name}\t{','.join(entry.scopes)}\t{entry.created_at}\t{state}")
    return 0


def _keys_revoke(options: argparse.Namespace) -> int:
    revoked = _key_store().revoke(options.name)
    print(f"revoked {revoked} key(s) named {options.name!r}")
    return 0 if revoked else 1


def _subscriptions_add(options: argparse.Namespace) -> int:
    from pipelines import subscription_commands

    return subscription_commands.add(options.name, options.url, options.stream)


def _subscriptions_list(options: argparse.Namespace) -> int:
    from pipelines import subscription_commands

    return subscription_commands.show()


def _subscriptions_remove(options: argparse.Namespace) -> int:
    from pipelines import subscription_commands

    return subscription_commands.remove(options.name)


def _subscriptions_replay(options: argparse.Namespace) -> int:
    from pipelines import subscription_commands

    return subscription_commands.replay(options.name, options.since)


def _sql(options: argparse.Namespace) -> int:
    from pipelines.analyst_sql import run_query

    return run_query(
        options.query,
        options.format,
        load(HomeSettings).snapshots_dir,
        options.output,
        force=options.force,
    )


def _changes(options: argparse.Namespace) -> int:
    from pipelines.history_commands import run_changes

    if not 1 <= options.limit <= 10_000:
        raise UsageError("--limit must be 1 to 10000")
    return run_changes(
        options.stream, options.since, options.limit, load(HomeSettings).snapshots_dir
    )


def _forget(options: argparse.Namespace) -> int:
    from pipelines.forget_command import run_forget

    return run_forget(
        options.stream, options.keys, options.reason, suppress=options.suppress,
        lift=options.lift, verbose=options.verbose,
    )  # fmt: skip


def _diff(options: argparse.Namespace) -> int:
    from pipelines.history_commands import run_diff

    return run_diff(
        options.before, options.after, options.stream, options.format,
        load(HomeSettings).snapshots_dir,
    )  # fmt: skip


def _docs(options: argparse.Namespace) -> int:
    if options.page == "settings":
        from pipelines.settings_page import PAGE, write_settings_page

        return write_settings_page(options.out or PAGE, force=options.force)
    from pipelines.data_dictionary import PAGE, write_dictionary

    out = options.out or PAGE
    return write_dictionary(load(HomeSettings).snapshots_dir, out, force=options.force)


def _export(options: argparse.Namespace) -> int:
    from pipelines.export import run_export

    return run_export(options.to, load(HomeSettings), force=options.force)


def _report(options: argparse.Namespace) -> int:
    from pipelines.report import write_report

    home = load(HomeSettings)
    return write_report(home.dagster_home, home.snapshots_dir, options.out, force=options.force)


def _demo(options: argparse.Namespace) -> int:
    from importlib.util import find_spec

    if find_spec("sandbox") is None:
        print(SANDBOX_MISSING, file=sys.stderr)
        return 2
    from pipelines.demo import run_demo

    return run_demo(options)


def _dev(options: argparse.Namespace) -> int:
    from pipelines.instance import prepare_dagster_home
    from pipelines.processes import WORKSPACE, installed_command, run_until_stopped, taken_port

    host = "127.0.0.1"
    taken = taken_port(host, [("Dagster UI", options.port)])
    if taken is not None:
        print(f"ductwork: {taken}", file=sys.stderr)
        return 2
    prepare_dagster_home(load(HomeSettings).dagster_home)
    command = [installed_command("dg"), "dev", "-w", str(WORKSPACE), "-h", host]
    command += ["-p", str(options.port)]
    env = os.environ.copy()
    return run_until_stopped("dev", lambda group: group.start(command, env).wait())


# The function that runs each subcommand, by the name its parser gives (``cli_parser``).
HANDLERS = {
    "changes": _changes,
    "demo": _demo,
    "dev": _dev,
    "diff": _diff,
    "docs": _docs,
    "export": _export,
    "forget": _forget,
    "keys_create": _keys_create,
    "keys_list": _keys_list,
    "keys_revoke": _keys_revoke,
    "report": _report,
    "run_job": _run_job,
    "serve": _serve,
    "sql": _sql,
    "subscriptions_add": _subscriptions_add,
    "subscriptions_list": _subscriptions_list,
    "subscriptions_remove": _subscriptions_remove,
    "subscriptions_replay": _subscriptions_replay,
    "sync": _sync,
}


if __name__ == "__main__":
    raise SystemExit(main())
