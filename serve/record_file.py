"""A large list's records in list order, in one file mapped into memory: a page is one slice.

Read from the snapshot a chunk at a time, a page of digital assets cost a query per few pages
once the list outgrew its cache. Instead, when a worker loads a snapshot, the list's record
JSON is written once, each record followed by a comma, into a file beside its offsets; every
worker of the host maps that file, so the records sit once in the OS page cache whatever the
number of workers, and a page of consecutive records is a single slice of the mapping.

The file sits beside the snapshot, hidden (``.records-...``), named after the snapshot file's
identity and the list, so a snapshot copied or changed in place gets a file of its own. The
names come from ``ductwork.snapshots``, whose ``prune`` removes a snapshot's record files with
it. The first worker to load a snapshot writes its file under a lock while the others wait,
then all map it; later starts of the API find it written. A worker maps the file it wrote
before renaming it into place, and the record files of other snapshots are removed as a new
one is written, but for those of the current snapshot and of any snapshot a worker serves
(leases), a past one included, so that answering the past and the present never makes them
rewrite each other's files (``record_files_in_use``); never another list's
of the same snapshot. A mapped file stays readable after its removal.

Layout: 8 bytes of magic, the records, their ``n + 1`` offsets from the first (int64), then
``n`` (int64).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import tempfile
from collections.abc import Collection, Iterable
from contextlib import suppress
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ductwork import file_modes, snapshots
from ductwork.snapshots.record_files import (
    RECORDS_LOCK,
    RECORDS_PARTIAL,
    RECORDS_PREFIX,
    record_file_names,
)

MAGIC = b"DWRECS01"


class RecordFile:
    """Records ``[0, n)`` of one list, each followed by a comma, with their offsets."""

    def __init__(self, mapped: mmap.mmap) -> None:
        if mapped[: len(MAGIC)] != MAGIC:
            raise ValueError("not a record file")
        count = int(np.frombuffer(mapped, dtype=np.int64, count=1, offset=len(mapped) - 8)[0])
        start = len(mapped) - 8 - 8 * (count + 1)
        self._mapped = mapped
        self._offsets = np.frombuffer(mapped, dtype=np.int64, count=count + 1, offset=start)
        # Every record with its comma, as a large binary array over the mapping (no copy).
        self._column = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(),
            count,
            [None, pa.py_buffer(self._offsets), pa.py_buffer(mapped)[len(MAGIC) :]],
        )

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def joined(self, start: int, end: int) -> bytes:
        """Records ``[start, end)`` (clipped to the list) joined by commas: one copy of one
        slice."""
        end = min(end, len(self))
        if start >= end:
            return b""
        base = len(MAGIC)
        return self._mapped[base + int(self._offsets[start]) : base + int(self._offsets[end]) - 1]

    def records_column(self, indexes: np.ndarray) -> pa.Array:
        """Records ``indexes`` (int64; -1 for none) in a large binary array, each without its
        comma, null where the index is -1."""
        missing = indexes < 0
        taken = self._column.take(pa.array(np.where(missing, 0, indexes), mask=missing))
        return pc.binary_slice(taken, 0, -1)  # drop each record's comma


def open_or_write(
    name: str, batches: Iterable[pa.Array], where: Path, siblings: Collection[str] = ()
) -> RecordFile:
    """Map the record file ``name`` in the folder ``where``, writing it from ``batches``
    (string arrays of records, each ending with its comma, in list order) when no worker has
    yet. Writing it removes the other record files there but ``siblings`` (the names of the
    same snapshot's other lists) and those of snapshots current or in use."""
    modes = file_modes.current()
    target = where / name
    lock = os.open(where / RECORDS_LOCK, os.O_RDWR | os.O_CREAT, modes.file_mode)
    try:
        modes.secure_descriptor(lock)
        fcntl.flock(lock, fcntl.LOCK_EX)  # one writer; the others wait, then map its file
        with suppress(FileNotFoundError, ValueError):
            return _mapped(target)
        found, written = _write(where, batches, modes)
        os.replace(written, target)
        kept = {name, *siblings, *record_files_in_use(where)}
        for other in where.glob(f"{RECORDS_PREFIX}*"):
            if other.name not in kept:
                # another snapshot's, or a write that was cut short
                other.unlink(missing_ok=True)  # still readable where it is mapped
        return found
    finally:
        os.close(lock)


def _mapped(path: Path) -> RecordFile:
    with open(path, "rb") as file:
        return RecordFile(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))


def _write(
    where: Path, batches: Iterable[pa.Array], modes: file_modes.FileModes
) -> tuple[RecordFile, Path]:
    """Write a record file under a temporary name, a batch at a time; map it before it is
    renamed."""
    ends: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    total = 0
    fd, temporary = tempfile.mkstemp(dir=where, prefix=RECORDS_PREFIX, suffix=RECORDS_PARTIAL)
    try:
        modes.secure_descriptor(fd)
        with os.fdopen(fd, "w+b") as file:
            file.write(MAGIC)
            for array in batches:
                batch_ends, data = _ends_and_data(array)
                ends.append(batch_ends + total)
                total += len(data)
                file.write(data)
            offsets = np.concatenate(ends)
            file.write(offsets.tobytes())
            file.write(np.int64(len(offsets) - 1).tobytes())
            file.flush()
            found = RecordFile(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
        return found, Path(temporary)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _ends_and_data(array: pa.Array) -> tuple[np.ndarray, memoryview]:
    """The end offset of each string of ``array`` (from 0) and the bytes they span."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == pa.string():
        width = np.int32
    elif array.type == pa.large_string():
        width = np.int64
    else:
        raise TypeError(f"records must be strings, not {array.type}")
    if array.null_count:
        raise ValueError("a record is missing")
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64), memoryview(b"")
    _, offsets_buffer, data_buffer = array.buffers()
    every = np.frombuffer(offsets_buffer, dtype=width)
    bounds = every[array.offset : array.offset + len(array) + 1]
    first, last = int(bounds[0]), int(bounds[-1])
    return (bounds[1:] - first).astype(np.int64), memoryview(data_buffer)[first:last]


def record_files_in_use(folder: Path) -> set[str]:
    """The names of the record files in ``folder`` that a writer of another must keep: those
    of the current snapshot (if ``folder`` holds the pointer) and of every snapshot file there
    that a reader leases (``Lease``), the past ones a worker serves included."""
    live = snapshots.current(folder)
    kept: set[str] = set()
    for snapshot in folder.glob(f"*{snapshots.SUFFIX}"):
        if snapshot.name.startswith("."):  # a copy being written: it has no record file yet
            continue
        if (live is not None and snapshot == live.path) or snapshots.in_use(snapshot):
            with suppress(FileNotFoundError):  # pruned meanwhile
                kept.update(record_file_names(snapshot))
    return kept
