"""Content fingerprints: what tells a publish that the warehouse holds what the current
snapshot holds, table by table, under the same release of the publishing SQL."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from pathlib import Path

import duckdb

from ductwork.history.recording import as_of_macro
from ductwork.history.row_versions import kept_tables, now_hashes_name
from ductwork.snapshots.folder import current
from ductwork.snapshots.stamp import Database, WarehouseStamp, unchanged_since_stamp
from ductwork.streams.registry import STREAMS
from ductwork.warehouse.schema import schema_sql, snapshot_sql
from warehouse_sql import quote_identifier, read_sql, stream_section

# The part of a content fingerprint that names its release (``release_digest``: the publishing
# SQL, which gave the part its name, the tables' DDL, the versioned tables, DuckDB's version).
RELEASE = "publish-sql"


def content_fingerprint(con: duckdb.DuckDBPyConnection, hashed: Collection[str] = ()) -> str:
    """A fingerprint of every table's content in the database in use: per table, its row count
    and an order-independent sum of row hashes, run-time columns (``synced_at``, a bookmark's
    ``updated_at``) left out. Equal content gives an equal fingerprint.

    ``hashed`` names the tables whose rows ``hash_current_rows`` hashed (the same hashes):
    their sums are taken from those."""
    # One query over every table, so that DuckDB's threads share the tables between them (most
    # tables are a single row group, which one query per table would hash on one thread).
    tables = con.execute(read_sql("content_columns")).fetchall()
    sums = " UNION ALL ".join(
        f"SELECT {index} AS position, count(*), coalesce(sum({_row_hash(table, columns, hashed)}"
        f"::HUGEINT), 0) FROM {_hashed_rows(table, hashed)}"
        for index, (table, columns) in enumerate(tables)
    )
    counted = con.execute(f"{sums} ORDER BY position").fetchall() if tables else []
    return ";".join(f"{tables[index][0]}:{count}:{total}" for index, count, total in counted)


def _row_hash(table: str, columns: list[str], hashed: Collection[str]) -> str:
    """The expression of a row's hash in the fingerprint's sum of ``table``."""
    if table in hashed:
        return "row_hash"
    return f"hash({', '.join(quote_identifier(c) for c in columns)})"


def _hashed_rows(table: str, hashed: Collection[str]) -> str:
    """What the fingerprint's sum of ``table`` reads: the table, or its rows' hashes."""
    return now_hashes_name(table) if table in hashed else quote_identifier(table)


def release_digest() -> str:
    """A digest of what decides a snapshot's definitions: the SQL a publish runs beyond the
    warehouse's tables, the tables' own DDL, the tables whose rows are versioned, and the
    DuckDB release that prints it all.

    What publishing adds (serving tables, comments, views, the history's macros and each
    stream's feed) is part of a snapshot too: a new release of that SQL must publish anew even
    when the data has not changed. And a publisher takes the definitions of a snapshot of the
    same release as what a publish makes (``guard.check_definitions``): a release that drops a
    table must not pass for the one that made it."""
    publishing_sql = (
        snapshot_sql()
        + read_sql("snapshot_info")
        + read_sql("snapshot_info_comments")
        + read_sql("history")
        + read_sql("history_recording")  # the history's tables and macros a publish makes
        + "".join(as_of_macro(stream.sql) for stream in STREAMS)
        + "".join(stream_section(stream.sql, "changed_keys") for stream in STREAMS)
        + schema_sql()
        + repr([(table.name, table.key) for table in kept_tables()])
        + duckdb.__version__
    )
    return hashlib.blake2b(publishing_sql.encode(), digest_size=8).hexdigest()


def unchanged_tables(before: str | None, after: str) -> set[str]:
    """The tables whose content is the same in two content fingerprints (``before`` None: no
    table). Under another release (``release_digest``) none is: what a publish makes of a
    table may differ."""
    if before is None or not same_release(before, after):
        return set()
    old, new = _fingerprint_parts(before), _fingerprint_parts(after)
    return {table for table, part in new.items() if table != RELEASE and old.get(table) == part}


def same_release(before: str | None, after: str) -> bool:
    """Whether two content fingerprints were taken by the same release (``release_digest``;
    ``before`` None: no)."""
    if before is None:
        return False
    return _fingerprint_parts(before).get(RELEASE) == _fingerprint_parts(after).get(RELEASE)


def _fingerprint_parts(fingerprint: str) -> dict[str, str]:
    """A fingerprint's parts by name: each table's ``count:sum``, and the release's."""
    return dict(part.split(":", 1) for part in fingerprint.split(";") if ":" in part)


def stamped_as_current(
    warehouse: duckdb.DuckDBPyConnection, snapshots_dir: Path
) -> WarehouseStamp | None:
    """The stamp that vouches the warehouse ``warehouse`` is untouched since it was published
    (or confirmed) as the current snapshot of ``snapshots_dir`` by this release, or None: what
    that publish's checks found of it then still holds."""
    live = current(snapshots_dir)
    if live is None:
        return None
    release = f";{RELEASE}:{release_digest()}"
    database = Database.in_use(warehouse)
    return unchanged_since_stamp(snapshots_dir, live.path.name, database.path, release)
