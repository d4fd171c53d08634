"""The warehouse's DDL and what every snapshot adds, put together from the registry's streams
and the shared SQL files."""

from __future__ import annotations

import duckdb

from ductwork.streams.registry import STREAMS
from warehouse_sql import SHARED_FILES, read_sql, section, stream_section


def _stream_files() -> list[str]:
    return [stream.sql for stream in STREAMS]


def schema_sql() -> str:
    """Every table of the warehouse: the shared bookkeeping, then each stream's tables, then
    the erasures' suppressions (kept in the working warehouse only: see ``WAREHOUSE_ONLY``)."""
    return "\n".join(part for part in [*table_sql(), section("erasure", "tables")] if part)


# The schemas of the working warehouse that no snapshot carries: the suppressed keys of
# ``ductwork forget`` (``warehouse_sql/erasure.sql``).
WAREHOUSE_ONLY = ("erasure",)


def snapshot_sql() -> str:
    """What a published snapshot gets beyond the warehouse's tables, in order: each stream's
    serving tables, then every comment, then the analyst views."""
    streams = _stream_files()
    parts = [stream_section(name, "serving") for name in streams]
    parts += [section(name, "comments") for name in SHARED_FILES]
    parts += [stream_section(name, "comments") for name in streams]
    parts += [stream_section(name, "views") for name in streams]
    return "\n".join(part for part in parts if part)


def comment_sql() -> list[str]:
    """Every ``comments`` section (shared files first), for the data dictionary."""
    return [section(name, "comments") for name in SHARED_FILES] + [
        stream_section(name, "comments") for name in _stream_files()
    ]


def table_sql() -> list[str]:
    """Every ``tables`` section (shared files first), for the data dictionary."""
    return [section(name, "tables") for name in SHARED_FILES] + [
        stream_section(name, "tables") for name in _stream_files()
    ]


def drop_warehouse_only(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the schemas no snapshot carries (``WAREHOUSE_ONLY``) from the database in use."""
    for schema in WAREHOUSE_ONLY:
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def add_snapshot_extras(con: duckdb.DuckDBPyConnection, version: str, fingerprint: str) -> None:
    """Serving tables, comments, analyst views and ``snapshot_info``, in the database in use.

    One transaction: its hundreds of COMMENT ON statements then commit once, not one by one.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        drop_warehouse_only(con)
        con.execute(snapshot_sql())
        con.execute(read_sql("snapshot_info"), [version, fingerprint])
        con.execute(read_sql("snapshot_info_comments"))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
