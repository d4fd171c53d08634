"""Bookmarks of incremental streams, kept in ``stream_state`` beside the rows they cover."""

from __future__ import annotations

from typing import Any

import duckdb

from ductwork.contract.encoding import dumps, loads
from ductwork.upstream.timestamps import canonical_or_received
from warehouse_sql import read_sql


def read_bookmark(con: duckdb.DuckDBPyConnection, stream: str) -> dict[str, Any] | None:
    """The stream's last committed bookmark, or None."""
    rows = con.execute("SELECT bookmark FROM stream_state WHERE stream = ?", [stream]).fetchall()
    return loads(rows[0][0]) if rows else None


def write_bookmark(con: duckdb.DuckDBPyConnection, stream: str, bookmark: dict[str, Any]) -> None:
    """Set the bookmark; call inside the transaction that wrote the rows it covers."""
    con.execute(read_sql("stream_state_upsert"), [stream, dumps(bookmark).decode()])


def clear_bookmark(con: duckdb.DuckDBPyConnection, stream: str) -> None:
    """Forget the bookmark: the next run starts from the beginning."""
    con.execute("DELETE FROM stream_state WHERE stream = ?", [stream])


def resume_from(
    con: duckdb.DuckDBPyConnection,
    stream: str,
    members: tuple[str, str],
    *,
    reset: bool,
    from_scratch: bool,
) -> tuple[str, str] | None:
    """Where a run starts: the saved bookmark as a pair of its ``members`` (an instant, then an
    id), or None.

    The instant comes back in the contract's form even when an earlier release saved it as
    the upstream wrote it. ``reset`` forgets the bookmark first; ``from_scratch`` (a
    reconciliation) ignores it.
    """
    if reset:
        clear_bookmark(con, stream)
    saved = read_bookmark(con, stream)
    if from_scratch or saved is None:
        return None
    return (canonical_or_received(saved[members[0]]), str(saved[members[1]]))
