"""What a publish adds to the mirror's memory, in the warehouse's ``history`` schema, before the
warehouse is copied into the new snapshot (so every snapshot carries the history up to itself).

For every table a stream writes, the rows that changed or went since the last publish: their
content as that publish had it (read from its snapshot) becomes a closed version, valid from
the publish that made it to this one; each current row keeps the publish since which it is as
it is. For every stream, the keys whose record (the JSON the feed carries) changed or went are
logged against this publish. Versions older than the history kept are dropped, never a current
row; a stream kept shorter (personal data, ``DUCTWORK_HISTORY_DAYS_<STREAM>``) loses its own
older versions and logged changes sooner, and its horizon (the oldest publish it still keeps)
is recorded for the feed and the past to refuse what lies before it.

If the warehouse's history does not end at the current snapshot's publish (a publish that
failed after recording it), it is first brought back to that snapshot's own.

A table whose content is the current snapshot's (the publish knows it from the two content
fingerprints) has no row that changed or went, and a stream whose feed reads only such tables
no record that did: both are passed over, so a publish compares only the tables that changed
(each of them whole), not all the mirror holds.

Likewise a stream whose SQL declares ``changed_keys`` (the keys whose record may differ from the
last publish's, read from the keys of its tables' rows that changed or went, ``changed_name``)
has only those keys' records compared with its recorded state, when the publish follows the
change (``follow_changes``: same release as the current snapshot, no erasure); the others' records
are the ones recorded, since none of their rows changed.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from ductwork.streams.model import Table
from ductwork.streams.registry import STREAMS
from warehouse_sql import quote_identifier, section, stream_section

PREVIOUS = "previous_snapshot"
# Columns that say when the sync wrote a row, not what the upstream holds: no change of theirs
# makes a version.
RUN_TIME_COLUMNS = frozenset({"synced_at"})
# The name of a table's table of current rows' publishes, after its own (``since_name``).
SINCE_SUFFIX = "__since"
# The name of the temp table of a table's current rows' hashes, after its own
# (``hash_current_rows``).
NOW_HASHES_SUFFIX = "__now_hashes"
# The name of the temp table of the keys of a table's rows that changed or went at this publish,
# after its own (``changed_name``).
CHANGED_SUFFIX = "__changed"
# Shared tables of the history schema (the rest are one pair per stream table).
SHARED = ("publishes", "mirror", "feed_state", "feed_log", "horizons")


# Run inside a publish's transaction once the warehouse's history is the current snapshot's
# and the publish's sequence number is known: ``ductwork forget`` erases keys there
# (``ductwork.erasure.warehouse``), so a history brought back from that snapshot loses them too.
Erase = Callable[[duckdb.DuckDBPyConnection, int], None]


@dataclass(frozen=True)
class Recorded:
    """What a publish recorded: its sequence number, and the changes it logged."""

    seq: int
    changes: int


def history_name(table: str) -> str:
    """The table of ``table``'s closed versions, in the ``history`` schema."""
    return f"history.{quote_identifier(table)}"


def since_name(table: str) -> str:
    """The table of the publish since which each current row of ``table`` is as it is."""
    return f"history.{quote_identifier(table + SINCE_SUFFIX)}"


def changed_name(table: str) -> str:
    """The temp table of the keys of ``table``'s rows that changed or went at the publish being
    recorded (a table with a key only): what a stream's ``changed_keys`` section reads."""
    return quote_identifier(table + CHANGED_SUFFIX)


def kept_tables() -> list[Table]:
    """Every table a stream writes, each once: the tables whose rows are versioned."""
    found: dict[str, Table] = {}
    for stream in STREAMS:
        for table in stream.tables:
            found.setdefault(table.name, table)
    return list(found.values())


def record_publish(
    con: duckdb.DuckDBPyConnection,
    live: Path | None,
    version: str,
    published_at: datetime,
    keep: timedelta,
    unchanged: Collection[str] = (),
    stream_keep: Mapping[str, timedelta] | None = None,
    erase: Erase | None = None,
    hashed: Collection[str] = (),
    follow_changes: bool = False,
) -> Recorded:
    """Record a publish of ``version`` (the warehouse as ``con`` holds it) against ``live``,
    the current snapshot's file (None before the first publish), in one transaction.

    ``unchanged`` names the tables whose content is known to be the current snapshot's: their
    rows are not compared again, nor the records of a stream whose feed reads only them.
    ``stream_keep`` names the streams whose history is kept shorter than ``keep``, and how long.
    ``erase``, when given, runs in the transaction before any row is compared (see ``Erase``).
    ``hashed`` names the tables whose current rows ``hash_current_rows`` hashed since they were
    last written: their rows are compared by those hashes, not hashed again.
    ``follow_changes``: the stream's recorded state is the current snapshot's, of this release
    (see the module's docstring): a stream declaring ``changed_keys`` has only those compared.
    """
    if live is not None:
        con.execute(f"ATTACH ? AS {PREVIOUS} (READ_ONLY)", [str(live)])
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            _follow_live_history(con, live is not None)
            seq = _next_seq(con)
            _ensure_mirror_id(con)
            if erase is not None:
                erase(con, seq)
            columns = _columns_by_table(con)
            previous = _main_tables(con, PREVIOUS) if live is not None else set()
            # A table never versioned before (newly kept) is compared even when unchanged: its
            # current rows have no publish since which they are so yet.
            versioned = set(_history_tables(con, current_database(con)))
            for table in kept_tables():
                table_columns = columns[table.name]
                known = table.name + SINCE_SUFFIX in versioned
                _ensure_history_tables(con, table, table_columns)
                if table.name not in unchanged or not known:
                    in_live, rehash = table.name in previous, table.name not in hashed
                    _version_rows(con, table, table_columns, seq, in_live, rehash)
                elif table.key:
                    _no_changed_keys(con, table)
                con.execute(table_macro(table, table_columns))
            con.execute(section("history", "macros"))
            changes = 0
            for stream in STREAMS:
                con.execute(as_of_macro(stream.sql))
                read = feed_tables(stream.sql)
                if not read or not read <= set(unchanged):
                    changes += _log_feed(con, stream.name, stream.sql, seq, follow_changes)
            con.execute(section("history", "record_publish"), [seq, version, published_at])
            oldest = _prune(con, published_at - keep)
            _prune_streams(con, published_at, oldest, stream_keep or {})
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        if live is not None:
            con.execute(f"DETACH {PREVIOUS}")
    return Recorded(seq, changes)


def _next_seq(con: duckdb.DuckDBPyConnection) -> int:
    head = con.execute(section("history", "head")).fetchall()
    return head[0][0] + 1 if head else 1


def _ensure_mirror_id(con: duckdb.DuckDBPyConnection) -> None:
    if not con.execute(section("history", "mirror_id")).fetchall():
        con.execute(section("history", "set_mirror_id"), [secrets.token_hex(16)])


def _history_tables(con: duckdb.DuckDBPyConnection, database: str) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = "
        "'history'",
        [database],
    ).fetchall()
    return [row[0] for row in rows]


def _follow_live_history(con: duckdb.DuckDBPyConnection, has_live: bool) -> None:
    """Make the warehouse's history the current snapshot's, unless it already ends there."""
    head = con.execute(section("history", "head")).fetchall()
    live_head = (
        con.execute(f"SELECT seq, version FROM {PREVIOUS}.history.publishes ORDER BY seq DESC "
                    "LIMIT 1").fetchall()
        if has_live and "publishes" in _history_tables(con, PREVIOUS)
        else []
    )  # fmt: skip
    if head == live_head:
        return
    for table in _history_tables(con, current_database(con)):
        con.execute(f"DROP TABLE history.{quote_identifier(table)}")
    con.execute(section("history", "tables"))
    if not live_head:
        return
    for table in _history_tables(con, PREVIOUS):
        name = quote_identifier(table)
        if table in SHARED:
            con.execute(f"INSERT INTO history.{name} SELECT * FROM {PREVIOUS}.history.{name}")
        else:
            con.execute(f"CREATE TABLE history.{name} AS SELECT * FROM {PREVIOUS}.history.{name}")


def current_database(con: duckdb.DuckDBPyConnection) -> str:
    """The name of the database ``con`` uses."""
    return con.execute("SELECT current_database()").fetchall()[0][0]


def _columns_by_table(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The columns of every table of the database in use's ``main`` schema, in order."""
    rows = con.execute(
        "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main' GROUP BY table_name"
    ).fetchall()
    return {table: columns for table, columns in rows}


def row_hash(columns: list[str], alias: str = "") -> str:
    """The expression hashing a row's content (run-time columns left out)."""
    prefix = f"{alias}." if alias else ""
    content = [f"{prefix}{quote_identifier(c)}" for c in columns if c not in RUN_TIME_COLUMNS]
    return f"hash({', '.join(content)})"


def key_columns(table: Table) -> tuple[str, ...]:
    """The columns that identify a row across versions: the table's key, or, for a table
    without one, the row's hash."""
    return table.key or ("row_hash",)


def _ensure_history_tables(
    con: duckdb.DuckDBPyConnection, table: Table, columns: list[str]
) -> None:
    """Create ``table``'s tables of closed versions and of current rows' publishes, if new."""
    name, history, since = (
        quote_identifier(table.name),
        history_name(table.name),
        since_name(table.name),
    )
    quoted_keys = [quote_identifier(k) for k in table.key]
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {history} AS "
        f"SELECT *, NULL::BIGINT AS valid_from, NULL::BIGINT AS valid_to FROM main.{name} LIMIT 0"
    )
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {since} AS SELECT "
        + "".join(f"{k}, " for k in quoted_keys)
        + f"{row_hash(columns)} AS row_hash, NULL::BIGINT AS since FROM main.{name} LIMIT 0"
    )


def hash_current_rows(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Hash every current row of every versioned table of the database in use once, each
    table's keys (none for a table without one) and hashes into a temp table
    (``now_hashes_name``), for the content fingerprint and ``record_publish`` to share;
    returns the tables hashed. A write to a table after this leaves its hashes stale."""
    columns = _columns_by_table(con)
    hashed = []
    for table in kept_tables():
        if table.name not in columns:
            continue
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {now_hashes_name(table.name)} AS "
            + _current_rows(table, columns[table.name], hashed=False)
        )
        hashed.append(table.name)
    return hashed


def now_hashes_name(table: str) -> str:
    """The temp table of ``table``'s current rows' keys and hashes (``hash_current_rows``)."""
    return quote_identifier(table + NOW_HASHES_SUFFIX)


def _current_rows(table: Table, columns: list[str], hashed: bool) -> str:
    """A query of ``table``'s current rows: their keys (none for a table without one) and
    ``row_hash``, from ``hash_current_rows``'s temp table when ``hashed``."""
    keys = "".join(f"{quote_identifier(k)}, " for k in table.key)
    source = (
        now_hashes_name(table.name)
        if hashed
        else f"(SELECT {keys}{row_hash(columns)} AS row_hash "
        f"FROM main.{quote_identifier(table.name)})"
    )
    return f"SELECT {keys}row_hash FROM {source}"


def _version_rows(
    con: duckdb.DuckDBPyConnection,
    table: Table,
    columns: list[str],
    seq: int,
    in_live: bool,
    rehash: bool = True,
) -> None:
    """Close the versions of ``table``'s rows that changed or went, and mark the new ones.
    ``in_live``: whether the current snapshot has the table (its rows are the versions that
    end); ``rehash``: whether its rows are hashed here (else ``hash_current_rows`` did)."""
    current = _current_rows(table, columns, hashed=not rehash)
    since = since_name(table.name)
    # Both leave ``ended_rows`` (the publishes of the rows that changed or went) and
    # ``arrived_rows`` (the rows new or changed, with their hashes).
    if table.key:
        _compare_by_key(con, table, current)
    else:
        _compare_by_hash(con, table, current)
    if in_live:
        _close_versions(con, table, columns, seq)
    keys = [quote_identifier(k) for k in key_columns(table)]
    ended = " AND ".join(f"e.{k} = s.{k}" for k in keys)
    con.execute(
        f"DELETE FROM {since} AS s WHERE EXISTS (SELECT 1 FROM ended_rows AS e WHERE {ended})"
    )
    con.execute(
        f"INSERT INTO {since} BY NAME SELECT *, $seq AS since FROM arrived_rows",
        {"seq": seq},
    )


def _compare_by_key(con: duckdb.DuckDBPyConnection, table: Table, current: str) -> None:
    """Compare ``table``'s rows with the publishes of its keys in one pass: a full join of the
    rows' hashes with the ``__since`` table, keeping the keys whose hash differs (new, changed
    or gone)."""
    keys = [quote_identifier(k) for k in table.key]
    match = " AND ".join(f"n.{k} = s.{k}" for k in keys)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE row_changes AS SELECT "
        + "".join(f"coalesce(n.{k}, s.{k}) AS {k}, " for k in keys)
        + "n.row_hash AS now_hash, s.row_hash AS since_hash, s.since "
        f"FROM ({current}) AS n "
        f"FULL JOIN {since_name(table.name)} AS s ON {match} "
        "WHERE n.row_hash IS DISTINCT FROM s.row_hash"
    )
    selected = "".join(f"{k}, " for k in keys)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE ended_rows AS SELECT {selected}since_hash AS row_hash, "
        "since FROM row_changes WHERE since_hash IS NOT NULL"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE arrived_rows AS SELECT {selected}now_hash AS row_hash "
        "FROM row_changes WHERE now_hash IS NOT NULL"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {changed_name(table.name)} AS "
        f"SELECT {selected.removesuffix(', ')} FROM row_changes"
    )


def _no_changed_keys(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    """``table``'s changed keys when its rows are not compared (its content is the current
    snapshot's): none."""
    keys = ", ".join(quote_identifier(k) for k in table.key)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {changed_name(table.name)} AS "
        f"SELECT {keys} FROM main.{quote_identifier(table.name)} LIMIT 0"
    )


def _compare_by_hash(con: duckdb.DuckDBPyConnection, table: Table, current: str) -> None:
    """Compare the rows of ``table``, which has no key, with its ``__since`` table by their
    hashes: a row whose content changed is one row gone and another new."""
    since = since_name(table.name)
    con.execute(f"CREATE OR REPLACE TEMP TABLE now_rows AS {current}")
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE ended_rows AS SELECT s.* FROM {since} AS s "
        "WHERE NOT EXISTS (SELECT 1 FROM now_rows AS n WHERE n.row_hash = s.row_hash)"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE arrived_rows AS SELECT n.* FROM now_rows AS n "
        f"WHERE NOT EXISTS (SELECT 1 FROM {since} AS s WHERE s.row_hash = n.row_hash)"
    )


def _close_versions(
    con: duckdb.DuckDBPyConnection, table: Table, columns: list[str], seq: int
) -> None:
    """Copy the rows of ``ended_rows`` as the current snapshot has them into ``table``'s closed
    versions, valid until publish ``seq``."""
    name, history = quote_identifier(table.name), history_name(table.name)
    previous = f"{PREVIOUS}.main.{name}"
    if not table.key:
        con.execute(
            f"INSERT INTO {history} BY NAME SELECT p.*, e.since AS valid_from, $seq AS valid_to "
            f"FROM {previous} AS p JOIN ended_rows AS e ON {row_hash(columns, 'p')} = e.row_hash",
            {"seq": seq},
        )
        return
    # The ended rows are found by their keys alone first, then only they are read whole: a join
    # on the keys reads every column of every row, though few rows ended in most publishes.
    joined = " AND ".join(f"p.{quote_identifier(k)} = e.{quote_identifier(k)}" for k in table.key)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE ended_at AS SELECT p.rowid AS row_id, e.since "
        f"FROM {previous} AS p JOIN ended_rows AS e ON {joined}"
    )
    con.execute(
        f"INSERT INTO {history} BY NAME SELECT p.*, a.since AS valid_from, $seq AS valid_to "
        f"FROM {previous} AS p JOIN ended_at AS a ON p.rowid = a.row_id",
        {"seq": seq},
    )


def as_of_macro(stream_sql: str) -> str:
    """The stream's ``as_of`` section: the ``<stream>_as_of(v)`` macro that the changes feed
    and the past read its records from; ValueError naming the file when it has none."""
    found = stream_section(stream_sql, "as_of")
    if not found:
        raise ValueError(
            f"warehouse_sql/streams/{stream_sql}.sql has no as_of section: the changes feed "
            f"needs {stream_sql}_as_of(v), the stream's key and record at publish v"
        )
    return found


def table_macro(table: Table, columns: list[str]) -> str:
    """``<table>_at(v)``: the table's rows at publish ``v`` (NULL: now), from its closed
    versions and its current rows that were already so then."""
    # COLUMNS rather than EXCLUDE: DuckDB prints an EXCLUDE list in no fixed order, and a
    # reader compares the macro's text with the one a publish makes (``snapshot_guard``).
    name = quote_identifier(table.name)
    macro = quote_identifier(f"{table.name}_at")
    since = since_name(table.name)
    if table.key:
        match = " AND ".join(
            f"s.{quote_identifier(k)} = t.{quote_identifier(k)}" for k in table.key
        )
    else:
        match = f"s.row_hash = {row_hash(columns, 't')}"
    return (
        f"CREATE OR REPLACE MACRO {macro}(v) AS TABLE "
        f"SELECT * FROM main.{name} WHERE v IS NULL "
        f"UNION ALL BY NAME "
        f"SELECT COLUMNS(lambda c: c NOT IN ('valid_from', 'valid_to')) "
        f"FROM {history_name(table.name)} "
        f"WHERE v IS NOT NULL AND valid_from <= v AND v < valid_to "
        f"UNION ALL BY NAME "
        f"SELECT t.* FROM main.{name} AS t "
        f"WHERE v IS NOT NULL AND EXISTS (SELECT 1 FROM {since} AS s WHERE {match} "
        f"AND s.since <= v)"
    )


def feed_tables(stream_sql: str) -> set[str]:
    """The tables whose rows a stream's feed reads: those whose ``<table>_at(v)`` its
    ``as_of`` section calls."""
    tables = {table.name for table in kept_tables()}
    called = re.findall(r"\b(\w+)_at\(", as_of_macro(stream_sql))
    return {name for name in called if name in tables}


def _main_tables(con: duckdb.DuckDBPyConnection, database: str) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'",
        [database],
    ).fetchall()
    return {row[0] for row in rows}


def _log_feed(
    con: duckdb.DuckDBPyConnection, stream: str, stream_sql: str, seq: int, follow: bool
) -> int:
    """Log the keys of ``stream`` whose record changed or went; returns how many. ``follow``:
    compare only the keys its ``changed_keys`` section gives, when it has one."""
    changed = stream_section(stream_sql, "changed_keys") if follow else ""
    if changed:
        con.execute(f"CREATE OR REPLACE TEMP TABLE feed_keys AS {changed}")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE feed_now AS SELECT key, hash(record::VARCHAR) AS "
        f"record_hash FROM ({_records_now(stream_sql, bool(changed))}\n) AS now(key, record)",
        {"keys": _feed_keys(con)} if changed else {},
    )
    before = _logged(con, seq, stream)
    compare = "feed_now_of_keys" if changed else "feed_now"
    con.execute(section("history", compare), {"stream": stream, "seq": seq})
    logged = _logged(con, seq, stream) - before
    for step in ("feed_state_forget", "feed_state_add"):
        con.execute(section("history", step), {"stream": stream, "seq": seq})
    return logged


def _records_now(stream_sql: str, of_keys: bool) -> str:
    """A query of the stream's current records (``key``, ``record``): every one, or
    (``of_keys``) those of the keys ``$keys``, read by its ``feed_records_now`` section when
    it has one (its quicker way to the rows of a few keys)."""
    macro = quote_identifier(f"{stream_sql}_as_of")
    if not of_keys:
        return f"SELECT key, record FROM {macro}(NULL)"
    quicker = stream_section(stream_sql, "feed_records_now").strip().removesuffix(";")
    if quicker:
        return quicker
    return f"SELECT key, record FROM {macro}(NULL) WHERE key IN (SELECT unnest($keys::VARCHAR[]))"


def _feed_keys(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The keys of the temp table ``feed_keys``."""
    found = con.execute("SELECT coalesce(list(key), []) FROM feed_keys").fetchall()
    return found[0][0]


def _logged(con: duckdb.DuckDBPyConnection, seq: int, stream: str) -> int:
    return con.execute(
        "SELECT count(*) FROM history.feed_log WHERE seq = ? AND stream = ?", [seq, stream]
    ).fetchall()[0][0]


def _prune(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> int:
    """Drop what no instant after the cutoff needs: publishes before the oldest kept, changes
    up to it, and row versions that ended by then. Returns the oldest publish kept."""
    oldest = con.execute(section("history", "oldest_kept"), [cutoff]).fetchall()[0][0]
    con.execute(section("history", "prune_publishes"), [oldest])
    con.execute(section("history", "prune_feed_log"), [oldest])
    con.execute(section("history", "prune_horizons"), [oldest])
    for table in kept_tables():
        con.execute(f"DELETE FROM {history_name(table.name)} WHERE valid_to <= ?", [oldest])
    return oldest


def _prune_streams(
    con: duckdb.DuckDBPyConnection,
    published_at: datetime,
    oldest: int,
    stream_keep: Mapping[str, timedelta],
) -> None:
    """Drop, for each stream kept shorter than the rest, its logged changes and its tables'
    row versions that no instant after its own cutoff needs, and record its horizon (which
    only moves forward). A table another stream writes too is pruned to the longest horizon
    of its streams."""
    horizons: dict[str, int] = {}
    for stream, keep in stream_keep.items():
        cutoff = published_at - keep
        seq = con.execute(section("history", "oldest_kept"), [cutoff]).fetchall()[0][0]
        recorded = con.execute(section("history", "horizon"), [stream]).fetchall()
        seq = max(seq, recorded[0][0] if recorded else seq)
        if seq <= oldest:
            continue
        horizons[stream] = seq
        con.execute(section("history", "drop_horizon"), [stream])
        con.execute(section("history", "set_horizon"), [stream, seq])
        con.execute(section("history", "prune_stream_feed_log"), {"stream": stream, "seq": seq})
    for table, writers in _table_writers().items():
        horizon = min(horizons.get(stream, oldest) for stream in writers)
        if horizon > oldest:
            con.execute(f"DELETE FROM {history_name(table)} WHERE valid_to <= ?", [horizon])


def _table_writers() -> dict[str, list[str]]:
    """Every versioned table with the streams that write it."""
    writers: dict[str, list[str]] = {}
    for stream in STREAMS:
        for table in stream.tables:
            writers.setdefault(table.name, []).append(stream.name)
    return writers
