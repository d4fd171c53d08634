"""How a run opens the warehouse: the sync's limits on DuckDB, and every table of the schema
put in place (the schema is made from the registry of streams, so this module sits above it,
while the readers write through ``ductwork.warehouse.loading`` below it)."""

from __future__ import annotations

import hashlib
from functools import cache

import duckdb

from ductwork.settings import SyncSettings, load
from ductwork.warehouse.schema import schema_sql
from ductwork.warehouse.sync_state import read_state, write_state

# Where the digest of the DDL last applied is kept, in ``sync_state``.
SCHEMA_KEY = "warehouse.schema"


@cache
def _schema() -> tuple[str, dict[str, str]]:
    ddl = schema_sql()
    return ddl, {"digest": hashlib.blake2b(ddl.encode(), digest_size=16).hexdigest()}


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Apply the DDL unless this very DDL was applied before: every step opens the warehouse,
    and comparing digests costs far less than running every idempotent statement again."""
    ddl, digest = _schema()
    try:
        if read_state(con, SCHEMA_KEY) == digest:
            return
    except duckdb.CatalogException:  # a new warehouse: no sync_state yet
        pass
    con.execute(ddl)
    write_state(con, SCHEMA_KEY, digest)


def prepare_connection(con: duckdb.DuckDBPyConnection, parallel: bool = False) -> None:
    """Set the sync's limits (``limit_connection``) and put every table of the schema in
    place."""
    limit_connection(con, parallel)
    _ensure_schema(con)


def limit_connection(con: duckdb.DuckDBPyConnection, parallel: bool = False) -> None:
    """Set the sync's memory limit; DuckDB works on one thread unless ``parallel`` (then on as
    many as it has cores).

    The database's thread count is shared by every connection of the process, so each step
    sets it as it opens the warehouse. A stream's step writes batches as Python parses the next
    pages: DuckDB's second thread only competed with the parser for the two cores (a medium
    full sync took about 7 % more CPU with it, 36.1 s against 33.7 s, and peaked higher). The
    publish, which hashes whole tables while nothing else runs, hashes on every core (and
    records and copies on one, see ``snapshots.publish``).
    """
    # DuckDB's own default (80 % of RAM) lets its buffers grow with the warehouse; a fixed
    # limit keeps the sync's memory flat as data grows (the setting's pattern admits nothing
    # but a number and a unit, so it is safe to place in the statement).
    con.execute(f"SET memory_limit = '{load(SyncSettings).warehouse_memory_limit}'")
    con.execute("RESET threads" if parallel else "SET threads = 1")
