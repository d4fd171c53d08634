"""Records the upstream deleted. It announces no deletion: a reader learns of one from a
complete listing that no longer holds the record, or from a 404 on the record's detail."""

from __future__ import annotations

import duckdb

from ductwork.warehouse.columns import Columns

GONE_COLUMNS = Columns(("id", "string"))


def forget_gone(con: duckdb.DuckDBPyConnection, statement: str, ids: list[str]) -> None:
    """Run a stream's ``forget_gone`` statement on ``ids`` (registered as ``gone_ids``): their
    current history versions close and their rows go. In the caller's transaction, with what
    told of the deletions."""
    con.register("gone_ids", GONE_COLUMNS.table([{"id": record_id} for record_id in ids]))
    try:
        con.execute(statement)
    finally:
        con.unregister("gone_ids")
