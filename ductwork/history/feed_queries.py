"""The history's reads every part of the changes feed shares: the publishes kept, a stream's
feed statements on its ``<stream>_as_of`` macro, and the records of given keys."""

from __future__ import annotations

from datetime import UTC

import duckdb

from ductwork.history.feed_entries import Publish
from warehouse_sql import fill, section, stream_section

WHOLE_LISTING = 2**62  # the limit that reads a walk's listing whole


def publishes(con: duckdb.DuckDBPyConnection) -> list[Publish]:
    """Every publish the snapshot's history keeps, oldest first."""
    rows = con.execute(section("history_feed", "publishes")).fetchall()
    return [Publish(seq, version, at.astimezone(UTC)) for seq, version, at in rows]


def feed_statement(name: str, stream_sql: str) -> str:
    """A statement of ``history_feed.sql``, on the stream's ``<stream>_as_of`` macro."""
    return fill(section("history_feed", name), records=f"{stream_sql}_as_of")


def records_of_keys(
    con: duckdb.DuckDBPyConnection, stream_sql: str, keys: list[str], pin: int | None = None
) -> dict[str, bytes]:
    """The records of ``keys`` at publish ``pin`` (None: the snapshot's own), by key; a key
    without a record then is missing. A stream may read its own publish's records its own,
    quicker way (section ``feed_records_now``)."""
    if not keys:
        return {}
    now = stream_section(stream_sql, "feed_records_now") if pin is None else ""
    statement = now or feed_statement("records", stream_sql)
    rows = run_statement(con, statement, {"pin": pin, "keys": keys})
    return {key: record.encode() for key, record in rows.fetchall()}


def run_statement(
    con: duckdb.DuckDBPyConnection, statement: str, params: dict[str, object]
) -> duckdb.DuckDBPyConnection:
    """Run ``statement`` with the parameters it names."""
    return con.execute(statement, named_parameters(statement, params))


def named_parameters(statement: str, params: dict[str, object]) -> dict[str, object]:
    """The parameters ``statement`` names (DuckDB refuses any other)."""
    return {k: v for k, v in params.items() if f"${k}" in statement}
