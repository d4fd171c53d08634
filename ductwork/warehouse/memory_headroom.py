"""DuckDB's memory limit as a budget the sync keeps to when it can.

A stream's step runs DuckDB under a small limit (``SyncSettings.warehouse_memory_limit``), which
keeps the sync's memory flat. A few of its transactions may need more at larger scales (measured
before the large tables lost their key indexes, which DuckDB held in memory: a batch of leads
or of lead details once the lead tables held several hundred thousand rows; and under a lower
limit, the publish's recording of a large upstream), as may a few whole-table reads (a large
detail queue, the submittal requests a large catalog implies). Such a transaction is rolled back
by its own code when DuckDB runs out of memory; run again here with twice the limit, it then
goes through, and the step goes on under the raised limit (the next step sets the configured one
again as it opens the warehouse).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

import duckdb

log = logging.getLogger("ductwork")

T = TypeVar("T")

# Three doublings: a configured 64MB may grow to 512MB before a step fails.
DOUBLINGS = 3
_UNITS = {"bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
_SHOWN = re.compile(r"^([0-9.]+) ?(bytes|KiB|MiB|GiB|TiB)$")


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The connection's DuckDB memory limit, in bytes (as DuckDB shows it, to a tenth of its
    unit)."""
    shown = con.execute("SELECT current_setting('memory_limit')").fetchone()
    match = _SHOWN.match(str(shown[0]) if shown else "")
    if match is None:
        raise ValueError(f"unexpected DuckDB memory limit {shown!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def with_memory_headroom(
    con: duckdb.DuckDBPyConnection, transaction: Callable[[], T], *, what: str
) -> T:
    """Run ``transaction`` (work that rolls itself back when it fails); when DuckDB runs out of
    memory in it, double the connection's memory limit and run it again, at most
    ``DOUBLINGS`` times. ``what`` names the work in the warning each doubling logs."""
    for doubling in range(DOUBLINGS + 1):
        try:
            return transaction()
        except duckdb.OutOfMemoryException:
            if doubling == DOUBLINGS:
                raise
            limit = memory_limit_bytes(con)
            raised = 2 * limit
            con.execute(f"SET memory_limit = '{raised // 1024}KiB'")
            log.warning(
                "%s ran out of DuckDB memory under a limit of %d MiB; retrying it under %d MiB",
                what, limit // 2**20, raised // 2**20,
            )  # fmt: skip
    raise AssertionError("unreachable")
