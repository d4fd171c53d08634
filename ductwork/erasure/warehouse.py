"""Erasing a stream's keys from the warehouse: every row of its current tables, every version
the history schema keeps, and the changes feed's records of them.

Two parts, both idempotent. ``erase_rows`` runs in one transaction before the publish: the
stream's current rows (its ``erase`` section), the history's versions and the feed's records,
and the suppression when asked. ``erase_in_publish`` runs again inside the publish's own
transaction (``snapshots.publish(erase=...)``): the history a publish brings back from the
current snapshot (after a publish that failed midway) loses the keys too, and the publish logs
each key as a delete with no record, so a feed walk from any earlier token shows it once, as
a ``delete``. Other keys' history, and the publishes, stay as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from ductwork.history.recording import Erase
from ductwork.history.row_versions import history_name, row_hash, since_name
from ductwork.streams.internal import contractors_answer_without
from ductwork.streams.model import Stream
from ductwork.warehouse.columns import Columns
from warehouse_sql import quote_identifier, section, stream_section

ERASED_COLUMNS = Columns(("key", "string"))
# The verbatim contractors answers, whose `data` text holds every contractor.
CONTRACTORS_RAW = "contractors_raw"


@contextmanager
def erased_keys(con: duckdb.DuckDBPyConnection, keys: list[str]) -> Iterator[None]:
    """The keys registered as ``erased_keys`` (one column, ``key``) while inside."""
    con.register("erased_keys", ERASED_COLUMNS.table([{"key": key} for key in keys]))
    try:
        yield
    finally:
        con.unregister("erased_keys")


def erase_rows(
    con: duckdb.DuckDBPyConnection, stream: Stream, keys: list[str], suppress: bool
) -> dict[str, int]:
    """Erase the keys of ``stream`` from the warehouse in one transaction (and suppress them,
    when ``suppress``); the rows removed, by table (``history.<table>`` for the history's)."""
    removed: dict[str, int] = {}
    with erased_keys(con, keys):
        con.execute("BEGIN TRANSACTION")
        try:
            for table, count in con.execute(stream_section(stream.sql, "erase_counts")).fetchall():
                removed[table] = int(count)
            con.execute(stream_section(stream.sql, "erase"))
            if any(table.name == CONTRACTORS_RAW for table in stream.tables):
                removed.update(_rewrite_answers(con, keys))
            removed.update(_erase_history(con, stream))
            if suppress:
                con.execute(section("erasure", "suppress"), {"stream": stream.name})
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return removed


def erase_in_publish(stream: Stream, keys: list[str], into: dict[str, int]) -> Erase:
    """The erasure a publish runs in its transaction (see the module's docstring); the rows it
    removes are put in ``into``, replacing what a run of it rolled back had put there (the
    publish retries its transaction when DuckDB runs out of memory)."""

    def erase(con: duckdb.DuckDBPyConnection, seq: int) -> None:
        removed: dict[str, int] = {}
        with erased_keys(con, keys):
            if any(table.name == CONTRACTORS_RAW for table in stream.tables):
                _add(removed, _rewrite_answers(con, keys))
            _add(removed, _erase_history(con, stream))
            con.execute(section("erasure", "feed_delete"), {"stream": stream.name, "seq": seq})
        into.clear()
        into.update(removed)

    return erase


def lift(con: duckdb.DuckDBPyConnection, stream: Stream, keys: list[str]) -> list[str]:
    """Lift the suppression of the keys of ``stream``; the keys that were suppressed."""
    with erased_keys(con, keys):
        found = suppressed(con, stream, keys)
        con.execute(section("erasure", "lift"), {"stream": stream.name})
    return found


def suppressed(con: duckdb.DuckDBPyConnection, stream: Stream, keys: list[str]) -> list[str]:
    """The keys of ``stream`` among ``keys`` that are suppressed."""
    rows = con.execute(section("erasure", "suppressed"), {"stream": stream.name, "keys": keys})
    return [row[0] for row in rows.fetchall()]


def _add(into: dict[str, int], removed: dict[str, int]) -> None:
    for table, count in removed.items():
        into[table] = into.get(table, 0) + count


def _history_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'history'"
    ).fetchall()
    return {row[0] for row in rows}


def _erase_history(con: duckdb.DuckDBPyConnection, stream: Stream) -> dict[str, int]:
    """Remove the keys (``erased_keys``) from the history of the stream's keyed tables (closed
    versions and current rows' publishes) and from the feed's log and state."""
    removed: dict[str, int] = {}
    present = _history_tables(con)
    column = stream.personal_key
    if column is None:
        raise ValueError(f"stream {stream.name!r} holds no personal data")
    for table in stream.tables:
        if column not in table.key:
            continue
        for name, qualified in (
            (table.name, history_name(table.name)),
            (f"{table.name}__since", since_name(table.name)),
        ):
            if name not in present:
                continue
            where = f"{quote_identifier(column)} IN (SELECT key FROM erased_keys)"
            count = con.execute(f"SELECT count(*) FROM {qualified} WHERE {where}").fetchall()
            con.execute(f"DELETE FROM {qualified} WHERE {where}")
            removed[f"history.{name}"] = int(count[0][0])
    if {"feed_log", "feed_state"} <= present:
        params = {"stream": stream.name}
        log_rows, state_rows = con.execute(section("erasure", "feed_rows"), params).fetchall()[0]
        con.execute(section("erasure", "feed_log_forget"), params)
        con.execute(section("erasure", "feed_state_forget"), params)
        removed["history.feed_log"] = int(log_rows)
        removed["history.feed_state"] = int(state_rows)
    return removed


def _rewrite_answers(con: duckdb.DuckDBPyConnection, keys: list[str]) -> dict[str, int]:
    """Rewrite the verbatim contractors answers (current and every kept version) without the
    contractors of ``keys``. The current answer's row in the history keeps its publish: its
    hash there follows the rewrite, so the next publish takes it for unchanged rather than
    closing a version of the answer as it was."""
    wanted = set(keys)
    present = _history_tables(con)
    columns = [
        row[0]
        for row in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [CONTRACTORS_RAW],
        ).fetchall()
    ]
    hashed = row_hash(columns)
    rewritten = 0
    tables = [f"main.{quote_identifier(CONTRACTORS_RAW)}"]
    if CONTRACTORS_RAW in present:
        tables.append(history_name(CONTRACTORS_RAW))
    for qualified in tables:
        rows = con.execute(f"SELECT rowid, body::VARCHAR, {hashed} FROM {qualified}").fetchall()
        for row_id, body, old_hash in rows:
            new_body = contractors_answer_without(body, wanted)
            if new_body is None:
                continue
            con.execute(
                f"UPDATE {qualified} SET body = ? WHERE rowid = ?", [new_body.decode(), row_id]
            )
            rewritten += 1
            since = f"{CONTRACTORS_RAW}__since"
            if qualified.startswith("main.") and since in present:
                new_hash = con.execute(
                    f"SELECT {hashed} FROM {qualified} WHERE rowid = ?", [row_id]
                ).fetchall()[0][0]
                con.execute(
                    f"UPDATE {since_name(CONTRACTORS_RAW)} SET row_hash = ? WHERE row_hash = ?",
                    [new_hash, old_hash],
                )
    return {f"{CONTRACTORS_RAW} (rewritten)": rewritten} if rewritten else {}
