"""The ``ductwork`` command."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path
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
from ductwork.streams.registry import STREAMS, personal_streams
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
    parser = _parser()
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
        code = options.run(options)
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ductwork", description="Mirror the HVAC service into DuckDB and serve it again."
    )
    parser.add_argument("--version", action="version", version=f"ductwork {_version()}")
    sub = parser.add_subparsers(dest="command")

    sub.add_parser("sandbox", help="Start the sandbox upstream (see: ductwork sandbox --help).")

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
    streams = ", ".join(stream.name for stream in STREAMS)
    resumable = ", ".join(stream.name for stream in STREAMS if stream.resumable)
    sync.add_argument(
        "--full-refresh",
        action="append",
        metavar="STREAM",
        help=f"Re-read this stream from scratch (resume point forgotten, deletions detected); "
        f"repeatable; adds the stream to the selection. Streams: {streams}.",
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
    sync.set_defaults(run=_sync)

    run_job = sub.add_parser("run-job", help="Run one Dagster job of ductwork by name.")
    run_job.add_argument("job", help="e.g. pim_image_sync, catalog_sync, reconcile_all")
    run_job.add_argument("--run-id", default=None, help="Use this run id (a UUID).")
    run_job.add_argument(
        "--verbose", action="store_true", help="Also print Dagster's whole event stream."
    )
    run_job.set_defaults(run=_run_job)

    serve = sub.add_parser("serve", help="Run the read API on the current snapshot.")
    serve.add_argument("--host", default=None, help="Bind address (DUCTWORK_SERVE_HOST).")
    serve.add_argument("--port", type=int, default=None, help="Port (DUCTWORK_SERVE_PORT).")
    serve.add_argument("--workers", type=int, default=None, help="DUCTWORK_SERVE_WORKERS.")
    serve.set_defaults(run=_serve)

    keys = sub.add_parser("keys", help="Manage the read API's keys.")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="Issue a key; prints it as the last line.")
    create.add_argument("name")
    create.add_argument(
        "--scope",
        action="append",
        metavar="|".join([*GRANTABLE_SCOPES, ALL_SCOPES, f"{STREAM_SCOPE_PREFIX}STREAM"]),
        help="Required, repeatable; all: the four data scopes (ops only when named); "
        f"{STREAM_SCOPE_PREFIX}STREAM: one stream of the registry alone.",
    )
    create.set_defaults(run=_keys_create)
    keys_sub.add_parser("list", help="List keys (names, scopes, state).").set_defaults(
        run=_keys_list
    )
    revoke = keys_sub.add_parser("revoke", help="Revoke every key of that name.")
    revoke.add_argument("name")
    revoke.set_defaults(run=_keys_revoke)

    subs = sub.add_parser(
        "subscriptions", help="Who is POSTed a signed notification after each publish."
    )
    subs_sub = subs.add_subparsers(dest="subscriptions_command", required=True)
    add = subs_sub.add_parser(
        "add", help="Subscribe a URL to streams; prints its signing secret as the last line."
    )
    add.add_argument("name")
    add.add_argument("--url", required=True, help="Where notifications are POSTed.")
    add.add_argument(
        "--stream",
        action="append",
        required=True,
        metavar="STREAM",
        help=f"Required, repeatable. Streams: {streams}.",
    )
    add.set_defaults(run=_subscriptions_add)
    subs_sub.add_parser(
        "list", help="List subscriptions (URL, streams, cursor, active/failing/paused)."
    ).set_defaults(run=_subscriptions_list)
    remove = subs_sub.add_parser("remove", help="Remove a subscription.")
    remove.add_argument("name")
    remove.set_defaults(run=_subscriptions_remove)
    replay = subs_sub.add_parser(
        "replay", help="Deliver again every notification after a token, now (resumes it)."
    )
    replay.add_argument("name")
    replay.add_argument("--since", required=True, metavar="TOKEN", help="A changes-feed token.")
    replay.set_defaults(run=_subscriptions_replay)

    sql = sub.add_parser("sql", help="Run SQL on the current snapshot (read-only).")
    sql.add_argument("query")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument(
        "--output", type=Path, default=None, help="Write to this new file (required for parquet)."
    )
    _force_option(sql)
    sql.set_defaults(run=_sql)

    changes = sub.add_parser(
        "changes",
        help="A stream's changes as NDJSON (every record without --since); the next token on "
        "stderr.",
    )
    changes.add_argument("stream", help=f"One of: {streams}.")
    changes.add_argument("--since", default=None, metavar="TOKEN", help="A token printed before.")
    changes.add_argument(
        "--limit", type=int, default=1000, help="Changes read per page (1 to 10000)."
    )
    changes.set_defaults(run=_changes)

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
    forget.set_defaults(run=_forget)

    diff = sub.add_parser(
        "diff", help="What changed in the streams between two instants (or snapshot versions)."
    )
    diff.add_argument("--from", dest="before", required=True, metavar="INSTANT")
    diff.add_argument("--to", dest="after", required=True, metavar="INSTANT")
    diff.add_argument("--stream", default=None, help=f"One of: {streams} (default: all).")
    diff.add_argument("--format", choices=["table", "json"], default="table")
    diff.set_defaults(run=_diff)

    docs = sub.add_parser(
        "docs", help="Write the data dictionary from the current snapshot, or the settings page."
    )
    docs.add_argument(
        "--page",
        choices=["dictionary", "settings"],
        default="dictionary",
        help="dictionary (from the current snapshot's catalog) or settings (from the settings "
        "model)",
    )
    docs.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: docs/data-dictionary.md or docs/settings.md",
    )
    _force_option(docs)
    docs.set_defaults(run=_docs)

    export = sub.add_parser("export", help="Every table and view of the snapshot as Parquet.")
    export.add_argument("--to", required=True, metavar="DIR|s3://BUCKET/PREFIX")
    export.add_argument(
        "--force",
        action="store_true",
        help="Write into a folder that is not empty, replacing regular files of the same names "
        "(never a symlink or a folder).",
    )
    export.set_defaults(run=_export)

    report = sub.add_parser("report", help="Charts of the streams and the lead funnel (HTML).")
    report.add_argument("--out", type=Path, default=Path("ductwork-report.html"))
    _force_option(report)
    report.set_defaults(run=_report)

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
    demo.set_defaults(run=_demo)

    dev = sub.add_parser("dev", help="The Dagster UI on the instance under DUCTWORK_HOME.")
    dev.add_argument("--port", type=int, default=3000, help="The UI's port on 127.0.0.1.")
    dev.set_defaults(run=_dev)
    return parser


def _force_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--force",
        action="store_true",
        help="Replace the file if it is a regular file (never a symlink or a folder).",
    )


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


if __name__ == "__main__":
    raise SystemExit(main())
