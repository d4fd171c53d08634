"""The serving states of past publishes: a few per worker, and the snapshots rebuilt for them,
a few per host, within a budget of disk.

Opening a past snapshot costs what loading any snapshot costs (its whole-file checksum, its
indexes); rebuilding one from the current snapshot's history costs seconds. So a worker tells
what a request would cost before doing it (``weight``), so that the request is refused or
counted by it first, and does the work off the event loop on one thread of its own:

- a worker loads one past snapshot at a time; requests for the one loading wait for it
  (without holding a thread), a request for another is refused (``PastBusy``, a 503);
- a host rebuilds one past snapshot at a time (a lock file, never waited for): a worker that
  finds another rebuilding is refused the same way;
- the rebuilt snapshots under ``snapshots/.past/`` are dropped, the least recently made first,
  beyond ``KEEP_REBUILT`` or beyond the disk budget (``DUCTWORK_SERVE_PAST_DISK_MB``): before a
  rebuild until one more fits, estimated by the current snapshot and its record files
  (``estimate``), after it until it fits with its record files to come, never the one just
  made. A rebuild whose estimate alone exceeds the budget is refused (``PastTooLarge``).
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from enum import IntEnum
from pathlib import Path

from ductwork import file_modes, snapshots
from ductwork.erasure import local_files
from ductwork.history.feed_entries import Publish
from ductwork.history.past import rebuild
from ductwork.snapshots import guard, record_files
from serve.erasures import Erasures
from serve.live_snapshot import ServingState, load_state
from serve.stream_index import CACHE_BYTES

# Named in ``ductwork.erasure.local_files``, which removes rebuilt snapshots after an erasure.
PAST_FOLDER = local_files.PAST_FOLDER
REBUILT_PREFIX = local_files.REBUILT_PREFIX
REBUILD_LOCK = local_files.REBUILD_LOCK
KEEP_REBUILT = 4  # rebuilt snapshots kept per host, the least recently made dropped first
DISK_BYTES = 2048 << 20  # the budget of ``snapshots/.past/`` unless the settings say otherwise
RETRY_AFTER_S = 2  # what a refused request is told to wait: about a load or a small rebuild


class Weight(IntEnum):
    """What answering from a past publish costs a worker, in units of a key's rate limit on
    top of the request's own: a page of a hundred records (a unit) takes about a millisecond
    to answer, a load hundreds, a rebuild a second or more."""

    HELD = 0  # the worker holds the state
    LOAD = 100  # a snapshot file on disk, to verify and index
    REBUILD = 1000  # rebuilt from the current snapshot's history, then loaded


class PastBusy(Exception):
    """Another past snapshot is loading in this worker, or being rebuilt on this host."""


class PastTooLarge(Exception):
    """Rebuilding the publish would take more disk than the budget of rebuilt snapshots."""


class PastStates:
    """The serving states of past publishes, ``keep`` per worker, least recently used dropped;
    the rebuilt snapshots of the host within ``disk_bytes``."""

    def __init__(
        self,
        snapshots_dir: Path,
        cache_bytes: int = CACHE_BYTES,
        keep: int = 2,
        disk_bytes: int = DISK_BYTES,
        erasures: Erasures | None = None,
    ) -> None:
        self._dir = snapshots_dir
        self._erasures = erasures
        self._generation = 0  # the erasures' generation the states held were loaded in
        self._cache_bytes = cache_bytes
        self._keep = keep
        self._disk_bytes = disk_bytes
        self._states: OrderedDict[str, ServingState] = OrderedDict()
        self._loading: dict[str, Future[ServingState]] = {}
        self._lock = threading.Lock()  # held for bookkeeping only, never across a load
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="past-loader")

    @property
    def rebuilt_dir(self) -> Path:
        """Where this host's rebuilt snapshots are kept."""
        return self._dir / PAST_FOLDER

    def weight(self, publish: Publish) -> Weight:
        """What answering from ``publish`` would cost now (a few file lookups, no load)."""
        self._follow_erasures()
        with self._lock:
            if publish.version in self._states or publish.version in self._loading:
                return Weight.HELD
        if self._kept(publish).exists() or self._rebuilt_path(publish).exists():
            return Weight.LOAD
        return Weight.REBUILD

    async def get(self, current: ServingState, publish: Publish) -> ServingState:
        """The state of ``publish``: held, or loaded (perhaps rebuilt) on the loader's thread.
        PastBusy while another publish loads in this worker or is rebuilt on this host;
        PastTooLarge when its rebuild would not fit the disk budget."""
        self._follow_erasures()
        return await self._get(current, publish)

    def _follow_erasures(self) -> int:
        """Drop every state held once a new erasure is seen (``serve.erasures``): each may
        hold what was erased, from a file since removed. The generation now."""
        if self._erasures is None:
            return 0
        with self._lock:
            generation = self._erasures.generation
            if generation != self._generation:
                self._generation = generation
                for state in self._states.values():
                    state.lease.release()  # answers under way finish on its connection
                self._states.clear()
            return generation

    async def _get(self, current: ServingState, publish: Publish) -> ServingState:
        with self._lock:
            found = self._states.get(publish.version)
            if found is not None:
                self._states.move_to_end(publish.version)
                return found
            loading = self._loading.get(publish.version)
            if loading is None:
                if self._loading:
                    raise PastBusy("another past snapshot is loading")
                loading = self._loader.submit(self._load_and_hold, current, publish)
                self._loading[publish.version] = loading
        # Shielded: a client that goes away does not cancel the load others may wait for.
        return await asyncio.shield(asyncio.wrap_future(loading))

    def _load_and_hold(self, current: ServingState, publish: Publish) -> ServingState:
        try:
            state = self._load_unerased(current, publish)
            # Its indexes are long-lived objects, as the current snapshot's are: kept out of
            # the collector's sight (``serve.live_snapshot``), lest full collections walk them
            # in the middle of later requests.
            gc.freeze()
            with self._lock:
                self._states[publish.version] = state
                while len(self._states) > self._keep:
                    _, dropped = self._states.popitem(last=False)
                    dropped.lease.release()  # answers under way finish on its open connection
            return state
        finally:
            with self._lock:
                self._loading.pop(publish.version, None)

    def _load_unerased(self, current: ServingState, publish: Publish) -> ServingState:
        """``_load``, again when an erasure was marked while it loaded (the file it read
        may be one the erasure removed); PastBusy after a few."""
        for _ in range(3):
            generation = self._erasures.generation if self._erasures is not None else 0
            state = self._load(current, publish)
            if self._erasures is None or self._erasures.generation == generation:
                return state
            state.close()  # nobody answered from it
        raise PastBusy("erasures came while the past snapshot was loading")

    def _kept(self, publish: Publish) -> Path:
        return self._dir / f"{snapshots.PREFIX}{publish.version}{snapshots.SUFFIX}"

    def _rebuilt_path(self, publish: Publish) -> Path:
        return self.rebuilt_dir / f"{REBUILT_PREFIX}{publish.version}{snapshots.SUFFIX}"

    def _load(self, current: ServingState, publish: Publish) -> ServingState:
        kept = self._kept(publish)
        with suppress(FileNotFoundError):  # pruned since it was looked for: rebuilt instead
            if kept.exists():
                return load_state(snapshots.Snapshot(publish.version, kept), self._cache_bytes)
        for _ in range(2):  # a copy dropped by another worker between its lookup and its lease
            rebuilt = self._rebuilt(current, publish)
            with suppress(FileNotFoundError):
                snapshot = snapshots.Snapshot(publish.version, rebuilt)
                return load_state(snapshot, self._cache_bytes, with_history=False)
        raise PastBusy("the rebuilt snapshot was dropped while it was being opened")

    def _rebuilt(self, current: ServingState, publish: Publish) -> Path:
        """The rebuilt snapshot of ``publish``, made now unless the host has it; PastBusy while
        another worker of the host rebuilds one."""
        target = self._rebuilt_path(publish)
        if target.exists():
            return target
        folder = self.rebuilt_dir
        modes = file_modes.current()
        modes.make_private_dir(folder)
        lock = os.open(folder / REBUILD_LOCK, os.O_RDWR | os.O_CREAT, modes.file_mode)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PastBusy("another past snapshot is being rebuilt on this host") from None
            if not target.exists():
                snapshot_bytes, record_bytes = estimate(current.path)
                if snapshot_bytes + record_bytes > self._disk_bytes:
                    size = (snapshot_bytes + record_bytes) >> 20
                    raise PastTooLarge(f"about {size} MiB to rebuild")
                drop_rebuilt(folder, self._disk_bytes, room=snapshot_bytes + record_bytes)
                staging = folder / f".staging-{publish.version}{snapshots.SUFFIX}"
                staging.unlink(missing_ok=True)
                rebuild(current.path, publish, staging)
                modes.secure(staging)
                guard.write_checksum(staging, beside=target)
                os.replace(staging, target)
                # Its record files are written as it is loaded, next: room is kept for them.
                drop_rebuilt(folder, self._disk_bytes, room=record_bytes, spare=target)
        finally:
            os.close(lock)
        return target


def estimate(current: Path) -> tuple[int, int]:
    """What a rebuilt snapshot is expected to take: the current snapshot's bytes, and those
    of its record files (a past publish holds about as many records as the current one)."""
    record_bytes = 0
    for name in record_files.record_file_names(current):
        with suppress(FileNotFoundError):
            record_bytes += (current.parent / name).stat().st_size
    return current.stat().st_size, record_bytes


def disk_used(folder: Path) -> int:
    """Bytes the files of ``folder`` take (rebuilt snapshots, checksums, record files)."""
    used = 0
    for path in folder.iterdir():
        with suppress(FileNotFoundError):
            if path.is_file():
                used += path.stat().st_size
    return used


def drop_rebuilt(
    folder: Path, disk_bytes: int, room: int = 0, spare: Path | None = None
) -> list[Path]:
    """Drop the rebuilt snapshots of ``folder``, the least recently made first, with their
    checksums and record files, while more than ``KEEP_REBUILT`` are kept or they and
    ``room`` more bytes exceed ``disk_bytes``; never ``spare``. A file still open elsewhere
    stays readable there (its disk is freed when the last worker lets it go)."""
    made = sorted(
        folder.glob(f"{REBUILT_PREFIX}*{snapshots.SUFFIX}"), key=lambda p: p.stat().st_mtime
    )
    dropped = []
    for old in made:
        if old == spare:
            continue
        if len(made) - len(dropped) <= KEEP_REBUILT and disk_used(folder) + room <= disk_bytes:
            break
        with suppress(FileNotFoundError):
            for name in record_files.record_file_names(old):
                (folder / name).unlink(missing_ok=True)
        old.unlink(missing_ok=True)
        guard.checksum_path(old).unlink(missing_ok=True)
        dropped.append(old)
    return dropped
