"""What a reader trusts of a snapshot file before serving it: nothing it did not check.

Whoever can write the data folder's snapshots or the object store's prefix could otherwise
hand every replica a file whose views read the host's files. So a snapshot is opened on a
locked connection (no file, URL or extension beyond the file itself, no setting changed
afterwards), its SHA-256 must match the one its publisher wrote beside it
(``<file>.sha256``), and its definitions (what DuckDB's catalog lists) must be exactly what a
publish makes: the registry's
tables, the tables and views a publish adds (each view with its own text), the history's
tables and macros, nothing else.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import duckdb

from ductwork import file_modes
from ductwork.history.recording import record_publish
from ductwork.history.row_versions import kept_tables
from ductwork.warehouse.schema import add_snapshot_extras, schema_sql
from warehouse_sql import quote_identifier

CHECKSUM_SUFFIX = ".sha256"
# The settings every reader opens a snapshot with (``ductwork sql`` adds a spill folder).
LOCKED: dict[str, object] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_persistent_secrets": False,
    "lock_configuration": True,
}
_CHUNK = 1 << 20
MISMATCH = "its content does not match the checksum its publisher wrote"


class SnapshotRefused(RuntimeError):
    """A snapshot that is not served: its file's name, and why in one line."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name
        self.why = why


def checksum_path(snapshot: Path) -> Path:
    """Where the publisher writes the snapshot's checksum: beside it."""
    return snapshot.with_name(snapshot.name + CHECKSUM_SUFFIX)


def checksum_of(snapshot: Path) -> str:
    """The SHA-256 of the file, in hex."""
    digest = hashlib.sha256()
    with snapshot.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksum(snapshot: Path, beside: Path | None = None) -> Path:
    """Write the file's checksum beside it, or beside ``beside`` (the name a staging copy is
    about to take), as its publisher; returns the checksum's path."""
    return write_checksum_text(beside or snapshot, checksum_of(snapshot))


def write_checksum_text(snapshot: Path, checksum: str) -> Path:
    """Write ``checksum`` (hex) as the checksum of ``snapshot``; returns where."""
    target = checksum_path(snapshot)
    file_modes.current().write_private(target, (checksum + "\n").encode("ascii"))
    return target


def verify_checksum(snapshot: Path) -> None:
    """SnapshotRefused unless the file's checksum is the one written beside it."""
    try:
        expected = checksum_path(snapshot).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        raise SnapshotRefused(snapshot.name, "no checksum beside it") from None
    if checksum_of(snapshot) != expected:
        raise SnapshotRefused(snapshot.name, MISMATCH)


def open_locked(snapshot: Path) -> duckdb.DuckDBPyConnection:
    """The snapshot, read-only, on a connection that reaches nothing else."""
    return duckdb.connect(str(snapshot), read_only=True, config=dict(LOCKED))


def unlocked_connection() -> duckdb.DuckDBPyConnection:
    """A connection in memory with no extension to load, that may still attach files: attach
    what it works on, then ``lock_down`` it before running anything a snapshot defines."""
    loose = {"enable_external_access", "lock_configuration"}
    return duckdb.connect(config={k: v for k, v in LOCKED.items() if k not in loose})


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """From now on, ``con`` reaches no file beyond those attached, and keeps its settings."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


Definitions = dict[tuple[str, str, str], str]  # (kind, schema, name) -> what runs when it is read


def definitions_of(con: duckdb.DuckDBPyConnection) -> Definitions:
    """What the database in use holds, by kind, schema and name, each with what runs when it
    is read: a view's SQL, a macro's definition, a table's generated columns (a table's other
    columns run nothing, so a table written by an earlier release still matches)."""
    found: Definitions = {}
    for kind, schema, name, text in con.execute(_DEFINITIONS).fetchall():
        found[(kind, schema, name)] = text or ""
    return found


_DEFINITIONS = """
SELECT 'table', t.schema_name, t.table_name,
       string_agg(c.column_name || ' AS ' || c.generation_expression, '; '
                  ORDER BY c.column_index) FILTER (WHERE c.is_generated)
FROM duckdb_tables() AS t
LEFT JOIN duckdb_columns() AS c USING (database_name, schema_name, table_name)
WHERE t.database_name = current_database() AND NOT t.internal AND NOT t.temporary
GROUP BY ALL
UNION ALL
SELECT 'view', schema_name, view_name, sql FROM duckdb_views()
WHERE database_name = current_database() AND NOT internal AND NOT temporary
UNION ALL
SELECT DISTINCT function_type, schema_name, function_name, macro_definition
FROM duckdb_functions()
WHERE database_name = current_database() AND NOT internal
"""
_DROP = {"table": "TABLE", "view": "VIEW", "macro": "MACRO", "table_macro": "MACRO TABLE"}


@cache
def expected_definitions() -> Definitions:
    """What a publish makes, as it makes it: an empty warehouse published in memory."""
    con = duckdb.connect()
    try:
        con.execute(schema_sql())
        # Its tables are empty, so comparing their rows would find nothing: passed over.
        empty = [table.name for table in kept_tables()]
        record_publish(con, None, "expected", datetime.now(UTC), timedelta(days=1), empty)
        add_snapshot_extras(con, "expected", "")
        return definitions_of(con)
    finally:
        con.close()


def check_definitions(
    con: duckdb.DuckDBPyConnection, name: str, published: Definitions | None = None
) -> None:
    """SnapshotRefused when the database in use (the snapshot file ``name``) holds anything a
    publish does not make, or anything whose text is not the one a publish gives it.

    ``published`` (a publisher's shortcut, never a reader's): the definitions of a snapshot that
    this release published and checked. A database holding exactly that passes without the
    expected definitions being built (a good part of a second); any other is checked in full."""
    found = definitions_of(con)
    if published is not None and found == published:
        return
    expected = expected_definitions()
    for entry, text in sorted(found.items()):
        kind, schema, item = entry
        if entry not in expected:
            raise SnapshotRefused(name, f"it holds a {kind} no publish makes: {schema}.{item}")
        if text != expected[entry]:
            why = f"its {kind} {schema}.{item} is not the one a publish makes"
            raise SnapshotRefused(name, why)


def drop_strays(con: duckdb.DuckDBPyConnection, published: Definitions | None = None) -> list[str]:
    """Drop from the database in use what no publish makes (the tables of a stream no longer
    in the registry, a table added by hand); returns what went, as ``schema.name``.

    ``published``: as for ``check_definitions``; a database holding nothing beyond it has nothing
    to drop."""
    found = set(definitions_of(con))
    if published is not None and found <= set(published):
        return []
    expected = expected_definitions()
    dropped = []
    for kind, schema, name in sorted(found - set(expected)):
        qualified = f"{quote_identifier(schema)}.{quote_identifier(name)}"
        con.execute(f"DROP {_DROP[kind]} IF EXISTS {qualified} CASCADE")
        dropped.append(f"{schema}.{name}")
    return dropped
