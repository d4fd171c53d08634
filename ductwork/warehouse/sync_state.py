"""What the sync keeps between runs (``sync_state``): resume points and the like, each written
in the transaction of the rows it covers."""

from __future__ import annotations

from typing import Any

import duckdb

from ductwork.contract.encoding import dumps, loads
from ductwork.upstream.timestamps import canonical_or_received
from warehouse_sql import section

# Suffixes of the keys a step keeps beside its resume point (which is under the asset's name).
PAGE_WALK = ".page_walk"
CONTENT = ".content"
DRIFT = ".drift"
DERIVED = ".derived"


def read_state(con: duckdb.DuckDBPyConnection, key: str) -> dict[str, Any] | None:
    """The value last written under ``key``, or None."""
    rows = con.execute(section("sync_state", "read"), [key]).fetchall()
    return loads(rows[0][0]) if rows else None


def write_state(con: duckdb.DuckDBPyConnection, key: str, value: dict[str, Any]) -> None:
    """Set the value; call inside the transaction that wrote the rows it covers."""
    con.execute(section("sync_state", "upsert"), [key, dumps(value).decode()])


def clear_state(con: duckdb.DuckDBPyConnection, key: str) -> None:
    """Forget the value under ``key``."""
    con.execute(section("sync_state", "clear"), [key])


def resume_from(
    con: duckdb.DuckDBPyConnection,
    asset: str,
    members: tuple[str, str],
    *,
    reset: bool,
    from_scratch: bool,
) -> tuple[str, str] | None:
    """Where a run of ``asset`` starts: its saved resume point as a pair of its ``members``
    (an instant, in the contract's form, then an id), or None.

    ``reset`` forgets the resume point first; ``from_scratch`` (a reconciliation) ignores it.
    """
    if reset:
        clear_state(con, asset)
    saved = read_state(con, asset)
    if from_scratch or saved is None:
        return None
    return (canonical_or_received(saved[members[0]]), str(saved[members[1]]))
