"""The versions of the rows of every table a stream writes, kept in the warehouse's ``history``
schema: for each table, its closed versions (``history_name``) and the publish since which each
current row is as it is (``since_name``), compared with its current rows at every publish, and
its ``<table>_at(v)`` macro, the table as a publish had it.

A row is known by its key, or, in a table without one, by its hash (``row_hash``): a row whose
content changed is then one row gone and another new.
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb

from ductwork.history.database_tables import (
    columns_by_table,
    current_database,
    history_tables,
    main_tables,
)
from ductwork.history.recording_sql import PREVIOUS, column_list, column_match, recording_sql
from ductwork.streams.model import Table
from ductwork.streams.registry import STREAMS
from warehouse_sql import quote_identifier

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


def now_hashes_name(table: str) -> str:
    """The temp table of ``table``'s current rows' keys and hashes (``hash_current_rows``)."""
    return quote_identifier(table + NOW_HASHES_SUFFIX)


def kept_tables() -> list[Table]:
    """Every table a stream writes, each once: the tables whose rows are versioned."""
    found: dict[str, Table] = {}
    for stream in STREAMS:
        for table in stream.tables:
            found.setdefault(table.name, table)
    return list(found.values())


def row_hash(columns: list[str], alias: str = "") -> str:
    """The expression hashing a row's content (run-time columns left out)."""
    return f"hash({column_list([c for c in columns if c not in RUN_TIME_COLUMNS], alias)})"


def key_columns(table: Table) -> tuple[str, ...]:
    """The columns that identify a row across versions: the table's key, or, for a table
    without one, the row's hash."""
    return table.key or ("row_hash",)


def _names(table: Table) -> dict[str, str]:
    """The names the recording's statements on ``table`` take, by placeholder."""
    return {
        "table": table.name,
        "since": table.name + SINCE_SUFFIX,
        "changed": table.name + CHANGED_SUFFIX,
        "now_hashes": table.name + NOW_HASHES_SUFFIX,
        "macro": f"{table.name}_at",
    }


def _key_columns_before(table: Table) -> str:
    """The table's key columns, each followed by a comma (none for a table without a key)."""
    return "".join(f"{quote_identifier(column)}, " for column in table.key)


def version_tables(
    con: duckdb.DuckDBPyConnection,
    seq: int,
    has_live: bool,
    unchanged: Collection[str],
    hashed: Collection[str],
) -> None:
    """Version the rows of every kept table at publish ``seq`` and make its ``<table>_at``
    macro. ``has_live``: whether there is a current snapshot, attached; ``unchanged`` and
    ``hashed`` as ``record_publish`` takes them."""
    columns = columns_by_table(con)
    previous = main_tables(con, PREVIOUS) if has_live else set()
    # A table never versioned before (newly kept) is compared even when unchanged: its current
    # rows have no publish since which they are so yet.
    versioned = set(history_tables(con, current_database(con)))
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


def _ensure_history_tables(
    con: duckdb.DuckDBPyConnection, table: Table, columns: list[str]
) -> None:
    """Create ``table``'s tables of closed versions and of current rows' publishes, if new."""
    con.execute(recording_sql("history_table", _names(table)))
    con.execute(
        recording_sql(
            "since_table",
            _names(table),
            key_columns=_key_columns_before(table),
            row_hash=row_hash(columns),
        )
    )


def hash_current_rows(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Hash every current row of every versioned table of the database in use once, each
    table's keys (none for a table without one) and hashes into a temp table
    (``now_hashes_name``), for the content fingerprint and ``record_publish`` to share;
    returns the tables hashed. A write to a table after this leaves its hashes stale."""
    columns = columns_by_table(con)
    hashed = []
    for table in kept_tables():
        if table.name not in columns:
            continue
        current = _current_rows(table, columns[table.name], hashed=False)
        con.execute(recording_sql("hash_now", _names(table), current=current))
        hashed.append(table.name)
    return hashed


def _current_rows(table: Table, columns: list[str], hashed: bool) -> str:
    """A query of ``table``'s current rows: their keys (none for a table without one) and
    ``row_hash``, from ``hash_current_rows``'s temp table when ``hashed``."""
    return recording_sql(
        "current_rows_hashed" if hashed else "current_rows",
        _names(table),
        key_columns=_key_columns_before(table),
        row_hash=row_hash(columns),
    )


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
    # Both leave ``ended_rows`` (the publishes of the rows that changed or went) and
    # ``arrived_rows`` (the rows new or changed, with their hashes).
    if table.key:
        _compare_by_key(con, table, current)
    else:
        _compare_by_hash(con, table, current)
    if in_live:
        _close_versions(con, table, columns, seq)
    ended = column_match(key_columns(table), "e", "s")
    con.execute(recording_sql("forget_ended", _names(table), match=ended))
    con.execute(recording_sql("add_arrived", _names(table)), {"seq": seq})


def _compare_by_key(con: duckdb.DuckDBPyConnection, table: Table, current: str) -> None:
    """Compare ``table``'s rows with the publishes of its keys in one pass, keeping the keys
    whose hash differs (new, changed or gone)."""
    quoted = [quote_identifier(column) for column in table.key]
    coalesced = ", ".join(f"coalesce(n.{key}, s.{key}) AS {key}" for key in quoted)
    match = column_match(table.key, "n", "s")
    con.execute(
        recording_sql(
            "row_changes", _names(table), coalesced_keys=coalesced, match=match, current=current
        )
    )
    keys = column_list(table.key)
    for step in ("ended_by_key", "arrived_by_key", "changed_keys"):
        con.execute(recording_sql(step, _names(table), keys=keys))


def _no_changed_keys(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    """``table``'s changed keys when its rows are not compared (its content is the current
    snapshot's): none."""
    con.execute(recording_sql("no_changed_keys", _names(table), keys=column_list(table.key)))


def _compare_by_hash(con: duckdb.DuckDBPyConnection, table: Table, current: str) -> None:
    """Compare the rows of ``table``, which has no key, with its ``__since`` table by their
    hashes."""
    con.execute(recording_sql("now_rows", current=current))
    con.execute(recording_sql("ended_by_hash", _names(table)))
    con.execute(recording_sql("arrived_by_hash", _names(table)))


def _close_versions(
    con: duckdb.DuckDBPyConnection, table: Table, columns: list[str], seq: int
) -> None:
    """Copy the rows of ``ended_rows`` as the current snapshot has them into ``table``'s closed
    versions, valid until publish ``seq``."""
    if not table.key:
        hashed = row_hash(columns, "p")
        con.execute(recording_sql("close_by_hash", _names(table), row_hash=hashed), {"seq": seq})
        return
    match = column_match(table.key, "p", "e")
    con.execute(recording_sql("ended_at", _names(table), match=match))
    con.execute(recording_sql("close_ended_at", _names(table)), {"seq": seq})


def table_macro(table: Table, columns: list[str]) -> str:
    """``<table>_at(v)``: the table's rows at publish ``v`` (NULL: now), from its closed
    versions and its current rows that were already so then."""
    if table.key:
        match = column_match(table.key, "s", "t")
    else:
        match = f"s.row_hash = {row_hash(columns, 't')}"
    return recording_sql("table_at", _names(table), match=match)


def drop_versions_ended_by(con: duckdb.DuckDBPyConnection, table: str, seq: int) -> None:
    """Drop ``table``'s versions that ended by publish ``seq``."""
    con.execute(recording_sql("prune_versions", {"table": table}), [seq])
