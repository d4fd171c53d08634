"""The large lists of one snapshot (digital assets, leads): sort keys in memory, records read
from the snapshot by position.

At publish time the snapshot numbers each list in the contract's order (``pos``), each position
pointing at its row in the base table (``row_id``). A worker keeps only the sort keys
(microseconds since the epoch, and lead ids) to turn a filter or a cursor into a position range.
Record JSON is read from the base table a chunk of positions at a time and kept in a small
least-recently-used cache: a consumer walking the pages costs one query per chunk rather than
one per page, and a cached page is answered without leaving the event loop. The digital assets,
paged far more, are mapped from a record file instead (``serve.record_file``): every page is
one slice of it, whatever the cache would have held, and the changes feed finds their current
records there by key (``serve.key_positions``).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from starlette.concurrency import run_in_threadpool

from ductwork.snapshots.record_files import record_file_name, record_file_names
from serve import record_file
from serve.key_positions import KeyPositions, key_positions
from serve.record_file import RecordFile
from warehouse_sql import fill, section

log = logging.getLogger("ductwork.serve")
NO_TIME = np.iinfo(np.int64).max
CHUNK = 1000  # positions per cached read: one page at the largest page size
CACHE_BYTES = 128 << 20  # per list and worker, unless the settings say otherwise


WRITE_RANGE = 100_000  # positions per query while writing a record file


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
    # Every record in one mapped file, when the list was loaded with one: then the cache and
    # the range query are not used.
    whole: RecordFile | None = None
    # The query of each position's key, for a list whose records the changes feed reads from
    # its record file: the index it gives is built at the feed's first need of it.
    keys_sql: str | None = None
    _by_key: KeyPositions | None = None
    _by_key_built: bool = False
    _by_key_lock: threading.Lock = field(default_factory=threading.Lock)

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

    def records_by_key(self, keys: list[str]) -> dict[str, bytes] | None:
        """The records of ``keys`` that the list holds, by key, from its record file; None
        when the list has no record file or no index of its keys (then the caller reads the
        snapshot). A blocking call, for a worker thread."""
        positions = self.record_positions(pa.array(keys, pa.string()))
        if positions is None:
            return None
        records = self.records_at(positions).to_pylist()
        return {
            key: record for key, record in zip(keys, records, strict=True) if record is not None
        }

    def record_positions(self, keys: pa.Array) -> np.ndarray | None:
        """The position of each of ``keys`` (strings) in the list's record file (int64, -1
        for a key the list does not hold); None as ``records_by_key``. A blocking call, for a
        worker thread."""
        by_key = self._key_index() if self.whole is not None else None
        return by_key.find_column(keys) if by_key is not None else None

    def records_at(self, positions: np.ndarray) -> pa.Array:
        """The records at ``positions`` (``record_positions``') from the record file, in a
        binary array, null at -1."""
        assert self.whole is not None  # as positions were found
        return self.whole.records_column(positions)

    def _key_index(self) -> KeyPositions | None:
        with self._by_key_lock:
            if not self._by_key_built and self.keys_sql is not None:
                table = self.reader.cursor().sql(self.keys_sql).to_arrow_table()
                self._by_key = key_positions(table.column(0), table.column(1))
                self._by_key_built = True
            return self._by_key

    async def joined(self, start: int, end: int) -> bytes:
        """The JSON of records [start, end) joined by commas, for a request handler: a slice
        of the record file when there is one."""
        if self.whole is not None:
            return self.whole.joined(start, end)
        return b",".join(await self.page(start, end))


def _statement(name: str, table: str, base: str) -> str:
    return fill(section("positioned_lists", name), list=table, base=base)


def load_list(
    reader: SnapshotReader,
    table: str,
    base: str,
    with_ids: bool,
    cache_bytes: int = CACHE_BYTES,
    snapshot: Path | None = None,
    key_column: str | None = None,
) -> PositionedList:
    """Read the sort keys of a numbered serving table whose positions point into ``base``;
    its records are cached up to ``cache_bytes``, or, given the ``snapshot`` file read,
    mapped from a record file, in which the changes feed finds them by ``key_column`` (a
    column of ``base``) when given."""
    keys_query = _statement("keys_and_ids" if with_ids else "keys", table, base)
    table_arrow = reader.cursor().sql(keys_query).to_arrow_table()
    keys = table_arrow.column(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    ids = table_arrow.column(1).to_pylist() if with_ids else None
    range_sql = _statement("records", table, base)
    listing = PositionedList(reader, range_sql, keys, ids, ChunkCache(cache_bytes))
    if snapshot is not None:
        if key_column is not None:
            keyed = section("positioned_lists", "keys_and_positions")
            listing.keys_sql = fill(keyed, list=table, base=base, key=key_column)
        # Read only if no worker wrote the file yet.
        batches = _every_record(reader, _statement("records_with_commas", table, base), len(keys))
        name = record_file_name(snapshot, table)
        try:
            siblings = record_file_names(snapshot)
            listing.whole = record_file.open_or_write(name, batches, snapshot.parent, siblings)
        except OSError as exc:  # e.g. a folder this process may not write: pages are read
            log.warning("%s: no record file (%s); pages read from the snapshot", table, exc)
        finally:
            # A write cut short (a full disk) leaves the generator suspended on an open
            # cursor of the snapshot, which would keep its database open in this process.
            batches.close()
            pa.default_memory_pool().release_unused()  # the batches written, kept by Arrow
        if listing.whole is not None and len(listing.whole) != len(keys):
            raise ValueError(f"{table}: {len(listing.whole)} records for {len(keys)} positions")
    return listing


def _every_record(reader: SnapshotReader, query: str, count: int) -> Iterator[pa.Array]:
    """The records of positions [0, count) that ``query`` reads by position range, a batch at
    a time, on a cursor of their own."""
    cursor = reader.con.cursor()
    try:
        for start in range(0, count, WRITE_RANGE):
            found = cursor.sql(query, params=[start, start + WRITE_RANGE])
            for batch in found.to_arrow_reader(WRITE_RANGE):
                yield batch.column(0)
    finally:
        cursor.close()
