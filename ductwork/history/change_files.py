"""Each publish's change files: a stream's changes feed as of that publish, written beside its
snapshot in feed order, so that a page of a walk since an earlier publish is one slice of it.

A walk since publish S pinned to publish P lists every key whose last change up to P came after
S, in (version, key) order, each in its state at P. Read from the history, a walk aggregates
the log of changes, then finds each key's record. Instead, every publish writes per stream the
listing of every key changed since the oldest publish kept, each with its last change and its
entry as the feed writes it (``Change.json_bytes``) followed by a comma: every walk pinned to
that publish is a suffix of it, and a page of one is a slice, whose JSON entries are the
slice's bytes less the last comma. Every ``gzip_chunks.CHUNK_ROWS`` rows also hold their
entries compressed (``deflated``), from which a page's gzip body is assembled
(``ductwork.history.gzip_chunks``).

A publish writes its file from the last publish's (its entries, but those of the keys changed
now and of changes no longer kept, then the entries of the keys changed now, by key), or from
the history's log when that one is missing. Layout: an Arrow IPC file of one record batch,
``version`` (int64: the publish of the key's last change), ``key``, ``deleted``, ``entry`` and
``deflated``.
A server maps it; without it (a replica receives the snapshots alone; a snapshot published
before change files were written) a walk is read from the history.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ductwork import file_modes
from ductwork.contract.encoding import dumps
from ductwork.history import feed_queries
from ductwork.history.change_file_names import CHANGES_PARTIAL, CHANGES_PREFIX, change_file_name
from ductwork.history.feed_entries import Change, Publish, opening_of, publish_members
from ductwork.history.gzip_chunks import (
    CHUNK_ROWS,
    Piece,
    deflated_chunks,
    gzip_around,
    value_offsets,
)
from ductwork.history.page_columns import ChangeColumns, PositionedChanges, joined_data
from ductwork.history.walk_listings import Listing, writable_as_is
from ductwork.streams.model import Stream
from ductwork.streams.registry import STREAMS
from warehouse_sql import section

FORMAT = {b"ductwork-change-file": b"2"}
# The entries of a change file, as a publish works them out.
ENTRIES = pa.schema(
    [
        ("version", pa.int64()),
        ("key", pa.string()),
        ("deleted", pa.bool_()),
        ("entry", pa.large_binary()),  # the entry's JSON, then a comma
    ]
)
# The file: the entries, and every CHUNK_ROWS rows those rows' entries compressed.
SCHEMA = pa.schema([*ENTRIES, ("deflated", pa.large_binary())], metadata=FORMAT)
OPENED = 16  # change files a server keeps open per snapshot (a walk pinned to an older publish)
_NOTHING = pa.scalar(b"", pa.large_binary())
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux only; elsewhere mapped lazily


def write_change_files(con: duckdb.DuckDBPyConnection, folder: Path) -> dict[str, int]:
    """Write every stream's change file for the newest publish the history of ``con`` (the
    warehouse, its publish just recorded) keeps, into ``folder`` (the snapshots'); the entries
    of each, by stream."""
    kept = feed_queries.publishes(con)
    if not kept:
        return {}
    head, oldest = kept[-1], kept[0]
    by_seq = {publish.seq: publish for publish in kept}

    def publish_of(version: int) -> Publish:
        return by_seq.get(version, oldest)

    written = {}
    for stream in STREAMS:
        table = None
        if len(kept) > 1:
            last = ChangeFile.open(folder / change_file_name(kept[-2].version, stream.name))
            table = _carried_on(con, stream, last, head.seq, oldest.seq, publish_of)
        if table is None:
            table = _from_log(con, stream, head.seq, oldest.seq, publish_of)
        write_change_file(table, folder, change_file_name(head.version, stream.name))
        written[stream.name] = table.num_rows
    return written


def _carried_on(
    con: duckdb.DuckDBPyConnection,
    stream: Stream,
    last: ChangeFile | None,
    seq: int,
    oldest: int,
    publish_of: Callable[[int], Publish],
) -> pa.Table | None:
    """The last publish's entries that still hold, then those of the keys publish ``seq``
    changed; None without the last publish's file."""
    if last is None:
        return None
    rows = con.sql(
        section("history_feed", "logged_keys"), params={"stream": stream.name, "seq": seq}
    )
    changed = rows.to_arrow_table().column(0).cast(pa.string()).combine_chunks()
    holding = pc.and_(
        pc.greater(pa.array(last.versions), oldest),
        pc.invert(pc.is_in(last.keys, value_set=changed)),
    )
    still = last.table.select(ENTRIES.names).filter(holding)
    now = _entries(con, stream, changed, np.full(len(changed), seq, np.int64), publish_of)
    return pa.concat_tables([still, now]).combine_chunks()


def _from_log(
    con: duckdb.DuckDBPyConnection,
    stream: Stream,
    seq: int,
    oldest: int,
    publish_of: Callable[[int], Publish],
) -> pa.Table:
    """Every key changed after publish ``oldest`` up to ``seq``, with its last change, read
    from the history's log (the walk since ``oldest`` pinned to ``seq``, whole)."""
    statement = feed_queries.feed_statement("changed", stream.sql)
    params = {
        "stream": stream.name,
        "since": oldest,
        "pin": seq,
        "after_version": -1,
        "after_key": "",
        "limit": feed_queries.WHOLE_LISTING,
    }
    listing = con.sql(statement, params=params).to_arrow_table()
    keys = listing.column(0).cast(pa.string()).combine_chunks()
    versions = listing.column(1).to_numpy().astype(np.int64, copy=False)
    return _entries(con, stream, keys, versions, publish_of)


def _entries(
    con: duckdb.DuckDBPyConnection,
    stream: Stream,
    keys: pa.Array,
    versions: np.ndarray,
    publish_of: Callable[[int], Publish],
) -> pa.Table:
    """The rows of ``keys`` changed at ``versions``: each key's record now (none: a delete)
    written into its entry."""
    names = keys.to_pylist()
    found = feed_queries.records_of_keys(con, stream.sql, names)
    records = pa.array([found.get(key) for key in names], pa.large_binary())
    columns = ChangeColumns(keys, versions, records, publish_of)
    if writable_as_is(keys):
        entries = columns.entry_array(b",")
    else:  # a key with a character JSON escapes: written by ``dumps``, entry by entry
        entries = pa.array([change.json_bytes() + b"," for change in columns], pa.large_binary())
    deleted = pc.is_null(records)
    return pa.table([pa.array(versions, pa.int64()), keys, deleted, entries], schema=ENTRIES)


def write_change_file(table: pa.Table, folder: Path, name: str) -> None:
    """Write ``table`` (its entries) as the change file ``name`` in ``folder``, with their
    compressed chunks: under a temporary name, flushed to disk, then renamed into place."""
    table = table.combine_chunks()
    table = pa.Table.from_arrays(
        [*table.columns, deflated_chunks(_column(table, "entry"))], schema=SCHEMA
    )
    modes = file_modes.current()
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=CHANGES_PREFIX, suffix=CHANGES_PARTIAL)
    try:
        modes.secure_descriptor(fd)
        with os.fdopen(fd, "wb") as file:
            with pa.ipc.new_file(file, SCHEMA) as writer:
                writer.write_table(table.combine_chunks())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, folder / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class ChangeFile:
    """One stream's change file, mapped: its entries in (version, key) order."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.versions = _column(table, "version").to_numpy(zero_copy_only=True)
        self.keys = _column(table, "key")
        self.deleted = _column(table, "deleted")
        self.entries = _column(table, "entry")
        self.deflated = _column(table, "deflated")
        self.offsets = value_offsets(self.entries)

    @classmethod
    def open(cls, path: Path) -> ChangeFile | None:
        """The change file at ``path`` mapped; None when there is none (or it is not one of
        this format).

        The mapping is populated at once: a page's first request then copies its entries
        without taking a page fault per few kilobytes of them."""
        try:
            with path.open("rb") as file:
                mapped = mmap.mmap(
                    file.fileno(), 0, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ
                )
            reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped)))
            if reader.schema != SCHEMA or reader.schema.metadata != FORMAT:
                return None
            return cls(reader.read_all())
        except (OSError, ValueError, pa.ArrowInvalid):  # ValueError: an empty file
            return None

    def __len__(self) -> int:
        return len(self.versions)

    def page(
        self,
        since: int,
        after: tuple[int, str] | None,
        count: int,
        publish_of: Callable[[int], Publish],
    ) -> tuple[ChangeSlice, bool]:
        """Up to ``count`` changes of the walk since publish ``since`` after (version, key)
        ``after`` (None: from its start), and whether the walk has more."""
        start = int(np.searchsorted(self.versions, since, side="right"))
        if after is not None:
            start = max(start, Listing(self.versions, self.keys).after(*after))
        end = min(start + count, len(self))
        start = min(start, end)
        found = ChangeSlice(
            self.keys.slice(start, end - start),
            self.versions[start:end],
            self.deleted.slice(start, end - start),
            self.entries.slice(start, end - start),
            publish_of,
            (self, start),
        )
        return found, end < len(self)

    def gzip_of(self, body: Sequence[Piece], entries_at: int, start: int, end: int) -> bytes:
        """The body made of the pieces ``body``, which holds rows ``[start, end)``'s entries
        from byte ``entries_at`` on (the last one without its comma), as gzip: the chunks
        wholly inside the rows but the one holding the last row taken as they are, the rest
        compressed now."""
        first = -(-start // CHUNK_ROWS)  # the first chunk starting inside the rows
        last = (end - 1) // CHUNK_ROWS  # the chunk holding the last row, left out
        if first >= last:
            return gzip_around(body, 0, 0, ())
        base = int(self.offsets[start]) - entries_at
        middle_at = int(self.offsets[first * CHUNK_ROWS]) - base
        middle_end = int(self.offsets[last * CHUNK_ROWS]) - base
        # The chunks one after another in the column's data (the rows between hold none).
        rows = self.deflated.slice(first * CHUNK_ROWS, (last - first) * CHUNK_ROWS)
        return gzip_around(body, middle_at, middle_end, [joined_data(rows, 0)])


def _column(table: pa.Table, name: str) -> pa.Array:
    """A column of ``table`` as one array (one record batch: no copy)."""
    column = table.column(name)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


class ChangeSlice(PositionedChanges):
    """A page's changes, sliced from a change file: keys, versions, whether each is a delete,
    and the entries as the feed writes them, each followed by a comma."""

    def __init__(
        self,
        keys: pa.Array,
        versions: np.ndarray,
        deleted: pa.Array,
        entries: pa.Array,
        publish_of: Callable[[int], Publish],
        origin: tuple[ChangeFile, int],
    ) -> None:
        self.keys = keys
        self.versions = versions
        self.deleted = deleted
        self.entries = entries
        self.publish_of = publish_of
        self.origin = origin  # the file, and the row of the slice's first change in it

    def gzip_of(self, body: Sequence[Piece], entries_at: int) -> bytes:
        """The body made of the pieces ``body``, holding the slice's entries written with
        commas from byte ``entries_at`` on, as gzip, from the file's compressed chunks where
        it can."""
        file, start = self.origin
        return file.gzip_of(body, entries_at, start, start + len(self.versions))

    def change_at(self, index: int) -> Change:
        publish = self.publish_of(int(self.versions[index]))
        key = self.keys[index].as_py()
        if self.deleted[index].as_py():
            return Change("delete", key, publish.version, publish.published_at, None)
        # The record lies between the entry's members and its closing brace and comma.
        members = publish_members(publish.version, publish.published_at)
        skipped = len(opening_of("upsert")) + len(dumps(key)) + len(members)
        record = self.entries[index].as_py()[skipped:-2]
        return Change("upsert", key, publish.version, publish.published_at, record)

    def write(self, separator: bytes) -> bytes | memoryview:
        """The entries' ``json_bytes`` joined by ``separator``: with a comma, a view of the
        slice's bytes as the file holds them."""
        if separator == b",":
            return joined_data(self.entries, 1)
        bare = pc.binary_slice(self.entries, 0, -1)
        closing = pa.scalar(separator, pa.large_binary())
        return joined_data(pc.binary_join_element_wise(bare, closing, _NOTHING), len(separator))


class ChangeFiles:
    """The change files a server has opened from the snapshots' folder, by publish version and
    stream, the most recently used kept up to ``OPENED`` (one found missing is remembered as
    such: a publish writes its files before its snapshot is current)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._opened: OrderedDict[tuple[str, str], ChangeFile | None] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Let every opened file go (an erasure rewrote or removed some): each is opened
        anew when next asked for."""
        with self._lock:
            self._opened.clear()

    def open_all(self, version: str) -> None:
        """Open every stream's change file of the publish of ``version`` now, so that the
        first page a walk pinned to it asks for does not wait for the opening."""
        for stream in STREAMS:
            self.change_file(stream.name, version)

    def change_file(self, stream: str, version: str) -> ChangeFile | None:
        """The change file of ``stream`` written by the publish of ``version``, if any."""
        name = (version, stream)
        with self._lock:
            if name in self._opened:
                self._opened.move_to_end(name)
                return self._opened[name]
        found = ChangeFile.open(self.folder / change_file_name(version, stream))
        with self._lock:
            self._opened[name] = found
            while len(self._opened) > OPENED:
                self._opened.popitem(last=False)
        return found
