"""The large lists of one snapshot (digital assets, leads): sort keys in memory, records read
from the snapshot by position.

At publish time the snapshot numbers each list in the contract's order (``pos``). A worker
keeps only the sort keys (microseconds since the epoch, and lead ids) to turn a filter or a
cursor into a position range, then reads exactly that range of record JSON from DuckDB.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

import duckdb
import numpy as np

NO_TIME = np.iinfo(np.int64).max
# Queries by table, written here once; only positions travel as parameters.
_RANGE_SQL = {
    table: f"SELECT record FROM {table} WHERE pos >= ? AND pos < ? ORDER BY pos"
    for table in ("serving_digital_assets", "serving_leads")
}


@dataclass
class SnapshotReader:
    """A read-only connection to one snapshot, with a cursor per thread."""

    con: duckdb.DuckDBPyConnection
    _local: threading.local = field(default_factory=threading.local)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB cursors run in parallel across threads)."""
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._local.cursor = self.con.cursor()
        return cur

    def rows(self, sql: str, params: list[object]) -> list[tuple]:
        """Run a parameterised query on this thread's cursor."""
        return self.cursor().execute(sql, params).fetchall()


@dataclass
class PositionedList:
    """One numbered list: its sort keys, and its records by position range."""

    reader: SnapshotReader
    table: str
    keys_us: np.ndarray
    ids: list[str] | None = None

    def __len__(self) -> int:
        return len(self.keys_us)

    def after_time(self, moment_us: int) -> int:
        """First position whose time key is strictly later than ``moment_us``."""
        return int(np.searchsorted(self.keys_us, moment_us, side="right"))

    def after_key(self, moment_us: int, key_id: str) -> int:
        """First position strictly after (``moment_us``, ``key_id``)."""
        low = int(np.searchsorted(self.keys_us, moment_us, side="left"))
        high = int(np.searchsorted(self.keys_us, moment_us, side="right"))
        assert self.ids is not None
        return bisect.bisect_right(self.ids, key_id, low, high)

    def records(self, start: int, end: int) -> list[bytes]:
        """Record JSON for positions [start, end)."""
        if start >= end:
            return []
        rows = self.reader.rows(_RANGE_SQL[self.table], [start, end])
        return [row[0].encode() for row in rows]


def load_list(
    reader: SnapshotReader, table: str, key_column: str, with_ids: bool
) -> PositionedList:
    """Read the sort keys of a numbered serving table."""
    id_part = ", id" if with_ids else ""
    query = f"SELECT {key_column}{id_part} FROM {table} ORDER BY pos"
    table_arrow = reader.cursor().sql(query).to_arrow_table()
    keys = table_arrow.column(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    ids = table_arrow.column(1).to_pylist() if with_ids else None
    return PositionedList(reader, table, keys, ids)
