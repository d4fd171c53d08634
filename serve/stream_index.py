"""The large lists of one snapshot (digital assets, leads): sort keys in memory, records read
from the snapshot by position.

At publish time the snapshot numbers each list in the contract's order (``pos``), each position
pointing at its row in the base table (``row_id``). A worker keeps only the sort keys
(microseconds since the epoch, and lead ids) to turn a filter or a cursor into a position range.
Record JSON is read from the base table a chunk of positions at a time and kept in a small
least-recently-used cache: a consumer walking the pages costs one query per chunk rather than
one per page, and a cached page is answered without leaving the event loop.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import numpy as np
from starlette.concurrency import run_in_threadpool

from warehouse_sql import NUMBERED_LISTS

NO_TIME = np.iinfo(np.int64).max
CHUNK = 1000  # positions per cached read: one page at the largest page size
CACHE_BYTES = 128 << 20  # per list and worker, unless the settings say otherwise
# Queries by table, written here once; only positions travel as parameters.
_RANGE_SQL = {
    table: (
        f"SELECT b.record FROM {table} AS n JOIN {base} AS b ON b.rowid = n.row_id "
        "WHERE n.pos >= ? AND n.pos < ? ORDER BY n.pos"
    )
    for table, base in NUMBERED_LISTS.items()
}
# Snapshots published by earlier releases copied the records into the numbered lists (and have
# no ``row_id``); they are still served until the next publish replaces them.
_COPIED_RANGE_SQL = {
    table: f"SELECT record FROM {table} WHERE pos >= ? AND pos < ? ORDER BY pos"
    for table in NUMBERED_LISTS
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
class ChunkCache:
    """Record chunks by index, least recently used dropped first beyond ``limit_bytes``."""

    limit_bytes: int = CACHE_BYTES
    _chunks: OrderedDict[int, tuple[list[bytes], int]] = field(default_factory=OrderedDict)
    _bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loading: dict[int, threading.Lock] = field(default_factory=dict)

    def get(self, index: int) -> list[bytes] | None:
        """The chunk, if cached."""
        with self._lock:
            found = self._chunks.get(index)
            if found is None:
                return None
            self._chunks.move_to_end(index)
            return found[0]

    def get_or_load(self, index: int, load: Callable[[], list[bytes]]) -> list[bytes]:
        """The chunk, loaded by ``load`` when not cached; concurrent requests for one chunk
        wait for a single load instead of each reading it."""
        found = self.get(index)
        if found is not None:
            return found
        with self._lock:
            gate = self._loading.setdefault(index, threading.Lock())
        with gate:
            found = self.get(index)
            if found is None:
                found = load()
                self.put(index, found)
        with self._lock:
            self._loading.pop(index, None)
        return found

    def put(self, index: int, records: list[bytes]) -> None:
        """Keep a chunk, dropping the least recently used ones over the limit."""
        size = sum(len(record) for record in records)
        with self._lock:
            if index in self._chunks:
                return
            self._chunks[index] = (records, size)
            self._bytes += size
            while self._bytes > self.limit_bytes and len(self._chunks) > 1:
                _, (_, dropped) = self._chunks.popitem(last=False)
                self._bytes -= dropped


@dataclass
class PositionedList:
    """One numbered list: its sort keys, and its records by position range."""

    reader: SnapshotReader
    range_sql: str
    keys_us: np.ndarray
    ids: list[str] | None = None
    cache: ChunkCache = field(default_factory=ChunkCache)

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

    def cached_records(self, start: int, end: int) -> list[bytes] | None:
        """Record JSON for positions [start, end) when every chunk of it is cached, else None
        (then ``records`` reads it; a blocking call, for a worker thread)."""
        return self._gather(start, end, self.cache.get)

    def records(self, start: int, end: int) -> list[bytes]:
        """Record JSON for positions [start, end), read from the snapshot where not cached."""
        found = self._gather(
            start, end, lambda index: self.cache.get_or_load(index, lambda: self._read_chunk(index))
        )
        assert found is not None  # every chunk was loaded
        return found

    def _gather(
        self, start: int, end: int, chunk_of: Callable[[int], list[bytes] | None]
    ) -> list[bytes] | None:
        """The records of positions [start, end) from the chunks ``chunk_of`` gives; None as
        soon as it gives none."""
        found: list[bytes] = []
        if start >= end:
            return found
        for index in range(start // CHUNK, (end - 1) // CHUNK + 1):
            chunk = chunk_of(index)
            if chunk is None:
                return None
            base = index * CHUNK
            found.extend(chunk[max(start - base, 0) : end - base])
        return found

    def _read_chunk(self, index: int) -> list[bytes]:
        bounds = [index * CHUNK, (index + 1) * CHUNK]
        return [row[0].encode() for row in self.reader.rows(self.range_sql, bounds)]

    async def page(self, start: int, end: int) -> list[bytes]:
        """``records`` for a request handler: from the cache on the event loop, otherwise
        read in a worker thread."""
        found = self.cached_records(start, end)
        if found is None:
            found = await run_in_threadpool(self.records, start, end)
        return found


def load_list(
    reader: SnapshotReader,
    table: str,
    key_column: str,
    with_ids: bool,
    cache_bytes: int = CACHE_BYTES,
) -> PositionedList:
    """Read the sort keys of a numbered serving table; its records are cached up to
    ``cache_bytes``."""
    id_part = ", id" if with_ids else ""
    query = f"SELECT {key_column}{id_part} FROM {table} ORDER BY pos"
    table_arrow = reader.cursor().sql(query).to_arrow_table()
    keys = table_arrow.column(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    ids = table_arrow.column(1).to_pylist() if with_ids else None
    columns = reader.rows(
        "SELECT column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND table_name = ?",
        [table],
    )
    pointing = ("row_id",) in columns
    range_sql = (_RANGE_SQL if pointing else _COPIED_RANGE_SQL)[table]
    return PositionedList(reader, range_sql, keys, ids, ChunkCache(cache_bytes))
