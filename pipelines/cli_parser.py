"""The arguments of ``ductwork``: one function per subcommand adds its parser. Each sets
``handler`` to the name of the function of ``pipelines.cli`` that runs it, so that this module
imports nothing a command needs to run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from ductwork.keys import ALL_SCOPES, GRANTABLE_SCOPES, STREAM_SCOPE_PREFIX
from ductwork.streams.registry import STREAMS, personal_streams

# The stream names the help texts list.
STREAM_NAMES = ", ".join(stream.name for stream in STREAMS)

# The subcommands of ``ductwork``, as argparse hands them out.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def parser(version: str) -> argparse.ArgumentParser:
    """The parser of ``ductwork``'s arguments; each subcommand sets ``handler``, the name of
    the function of ``pipelines.cli`` that runs it."""
    made = argparse.ArgumentParser(
        prog="ductwork", description="Mirror the HVAC service into DuckDB and serve it again."
    )
    made.add_argument("--version", action="version", version=f"ductwork {version}")
    sub = made.add_subparsers(dest="command")
    for add in (
        _add_sandbox,
        _add_sync,
        _add_run_job,
        _add_serve,
        _add_keys,
        _add_subscriptions,
        _add_sql,
        _add_changes,
        _add_forget,
        _add_diff,
        _add_docs,
        _add_export,
        _add_report,
        _add_demo,
        _add_dev,
    ):
        add(sub)
    return made


def _add_sandbox(sub: Subcommands) -> None:
    """``ductwork sandbox``."""
    sub.add_parser("sandbox", help="Start the sandbox upstream (see: ductwork sandbox --help).")


def _add_sync(sub: Subcommands) -> None:
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
    sync.set_defaults(handler="sync")


def _add_run_job(sub: Subcommands) -> None:
    """``ductwork run-job``."""
    run_job = sub.add_parser("run-job", help="Run one Dagster job of ductwork by name.")
    run_job.add_argument("job", help="e.g. pim_image_sync, catalog_sync, reconcile_all")
    run_job.add_argument("--run-id", default=None, help="Use this run id (a UUID).")
    run_job.add_argument(
        "--verbose", action="store_true", help="Also print Dagster's whole event stream."
    )
    run_job.set_defaults(handler="run_job")


def _add_serve(sub: Subcommands) -> None:
    """``ductwork serve``."""
    serve = sub.add_parser("serve", help="Run the read API on the current snapshot.")
    serve.add_argument("--host", default=None, help="Bind address (DUCTWORK_SERVE_HOST).")
    serve.add_argument("--port", type=int, default=None, help="Port (DUCTWORK_SERVE_PORT).")
    serve.add_argument("--workers", type=int, default=None, help="DUCTWORK_SERVE_WORKERS.")
    serve.set_defaults(handler="serve")


def _add_keys(sub: Subcommands) -> None:
    """``ductwork keys``."""
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
    create.set_defaults(handler="keys_create")
    keys_sub.add_parser("list", help="List keys (names, scopes, state).").set_defaults(
        handler="keys_list"
    )
    revoke = keys_sub.add_parser("revoke", help="Revoke every key of that name.")
    revoke.add_argument("name")
    revoke.set_defaults(handler="keys_revoke")


def _add_subscriptions(sub: Subcommands) -> None:
    """``ductwork subscriptions``."""
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
        help=f"Required, repeatable. Streams: {STREAM_NAMES}.",
    )
    add.set_defaults(handler="subscriptions_add")
    subs_sub.add_parser(
        "list", help="List subscriptions (URL, streams, cursor, active/failing/paused)."
    ).set_defaults(handler="subscriptions_list")
    remove = subs_sub.add_parser("remove", help="Remove a subscription.")
    remove.add_argument("name")
    remove.set_defaults(handler="subscriptions_remove")
    replay = subs_sub.add_parser(
        "replay", help="Deliver again every notification after a token, now (resumes it)."
    )
    replay.add_argument("name")
    replay.add_argument("--since", required=True, metavar="TOKEN", help="A changes-feed token.")
    replay.set_defaults(handler="subscriptions_replay")


def _add_sql(sub: Subcommands) -> None:
    """``ductwork sql``."""
    sql = sub.add_parser("sql", help="Run SQL on the current snapshot (read-only).")
    sql.add_argument("query")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument(
        "--output", type=Path, default=None, help="Write to this new file (required for parquet)."
    )
    _force_option(sql)
    sql.set_defaults(handler="sql")


def _add_changes(sub: Subcommands) -> None:
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
    changes.set_defaults(handler="changes")


def _add_forget(sub: Subcommands) -> None:
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
    forget.set_defaults(handler="forget")


def _add_diff(sub: Subcommands) -> None:
    """``ductwork diff``."""
    diff = sub.add_parser(
        "diff", help="What changed in the streams between two instants (or snapshot versions)."
    )
    diff.add_argument("--from", dest="before", required=True, metavar="INSTANT")
    diff.add_argument("--to", dest="after", required=True, metavar="INSTANT")
    diff.add_argument("--stream", default=None, help=f"One of: {STREAM_NAMES} (default: all).")
    diff.add_argument("--format", choices=["table", "json"], default="table")
    diff.set_defaults(handler="diff")


def _add_docs(sub: Subcommands) -> None:
    """``ductwork docs``."""
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
    docs.set_defaults(handler="docs")


def _add_export(sub: Subcommands) -> None:
    """``ductwork export``."""
    export = sub.add_parser("export", help="Every table and view of the snapshot as Parquet.")
    export.add_argument("--to", required=True, metavar="DIR|s3://BUCKET/PREFIX")
    export.add_argument(
        "--force",
        action="store_true",
        help="Write into a folder that is not empty, replacing regular files of the same names "
        "(never a symlink or a folder).",
    )
    export.set_defaults(handler="export")


def _add_report(sub: Subcommands) -> None:
    """``ductwork report``."""
    report = sub.add_parser("report", help="Charts of the streams and the lead funnel (HTML).")
    report.add_argument("--out", type=Path, default=Path("ductwork-report.html"))
    _force_option(report)
    report.set_defaults(handler="report")


def _add_demo(sub: Subcommands) -> None:
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
    demo.set_defaults(handler="demo")


def _add_dev(sub: Subcommands) -> None:
    """``ductwork dev``."""
    dev = sub.add_parser("dev", help="The Dagster UI on the instance under DUCTWORK_HOME.")
    dev.add_argument("--port", type=int, default=3000, help="The UI's port on 127.0.0.1.")
    dev.set_defaults(handler="dev")


def _force_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--force",
        action="store_true",
        help="Replace the file if it is a regular file (never a symlink or a folder).",
    )
