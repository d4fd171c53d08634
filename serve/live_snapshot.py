"""The snapshot an API worker serves from, swapped when a newer one is published.

Each request takes one ``ServingState`` and answers from it alone, so a response never mixes
two snapshots. A thread of each worker looks at the ``CURRENT`` pointer a few times a second and
loads a new publish as soon as it appears, traffic or not, while the old snapshot keeps serving;
every local worker thus serves a publish within about a second of it, and tells which snapshot
it serves through ``ductwork.serving_workers``.

A replica (``DUCTWORK_SNAPSHOT_STORE`` set) has no publisher beside it: a thread of each worker
polls the object store, brings a new snapshot into the local folder (one download per host,
see ``ductwork.snapshots.store.fetch_current``) and swaps it in the same way.

No snapshot is served before it passed ``ductwork.snapshots.guard``'s checks: its publisher's
checksum, a locked connection, definitions a publish makes. A refused snapshot leaves the
previous one serving and is reported (``refusal``) until a good one comes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import threading
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path

from ductwork import serving_workers, snapshots
from ductwork.history.change_files import ChangeFiles
from ductwork.history.feed import horizons, mirror_id
from ductwork.history.feed_entries import Publish
from ductwork.history.feed_queries import publishes
from ductwork.history.walk_listings import WalkListings
from ductwork.snapshots import guard, sync_times
from ductwork.snapshots.store import SnapshotStore, fetch_current
from ductwork.streams.model import Serving
from ductwork.streams.registry import STREAMS
from serve.catalog_index import CatalogIndex, load_catalog
from serve.erasures import Erasures
from serve.ready_answers import ReadyAnswers
from serve.record_times import RecordTimes, load_record_times
from serve.small_answers import SmallAnswers, load_small_answers
from serve.stream_index import CACHE_BYTES, PositionedList, SnapshotReader, load_list

log = logging.getLogger("ductwork.serve")
# Set in the ASGI scope of a request of the past (``serve.past``): the state it is answered from.
PAST_STATE = "ductwork.past_state"
# A look at the pointer is one stat; four a second serve a publish within about a second of it
# (the load itself takes the rest).
CHECK_INTERVAL_S = 0.25
RETRY_S = 5.0  # after a load that failed (not one the guard refused: that one is not retried)
STOP_WAIT_S = 5.0  # for the watcher at shutdown; a load under way is waited for anyway


@dataclass(frozen=True)
class ServingState:
    """Everything answered from one snapshot."""

    version: str
    path: Path
    published_at: float
    catalog: CatalogIndex
    small: SmallAnswers
    lists: dict[str, PositionedList]  # the large lists, by stream name
    reader: SnapshotReader
    lease: snapshots.Lease
    # The publishes its history keeps (oldest first; empty for a rebuilt past snapshot), and
    # the mirror's name that checks its tokens.
    publishes: tuple[Publish, ...] = ()
    mirror: str = ""
    # The streams kept shorter than the rest, with the oldest publish each one's history keeps
    # (``ductwork.history.feed.kept_for`` gives a stream's publishes from them).
    horizons: dict[str, int] = field(default_factory=dict)
    # When each record held in memory was first served as it is.
    times: RecordTimes = field(default_factory=RecordTimes)
    # The changes feed's walks read from this snapshot, each listing whole for its next pages.
    walks: WalkListings = field(default_factory=WalkListings)
    # The change files the publishes wrote beside the snapshots (None: a past snapshot's).
    change_files: ChangeFiles | None = None
    # The short path's answers of this snapshot, ready for their next request.
    ready: ReadyAnswers = field(default_factory=ReadyAnswers)

    def close(self) -> None:
        """Close the snapshot's connection and let the snapshot go (no request may be using
        this state any more)."""
        self.reader.con.close()
        self.lease.release()


def load_state(
    snapshot: snapshots.Snapshot, cache_bytes: int = CACHE_BYTES, with_history: bool = True
) -> ServingState:
    """Read a snapshot into memory, leased so that it is not pruned while it is served;
    each large list caches up to ``cache_bytes`` of records. A snapshot rebuilt for the past
    (``with_history`` false) has no history of its own. SnapshotRefused for a snapshot that
    fails the guard's checks."""
    lease = snapshots.Lease(snapshot.path)
    try:
        guard.verify_checksum(snapshot.path)
        # The connection stays open for position-range reads; it closes with the state.
        reader = SnapshotReader(guard.open_locked(snapshot.path))
        try:
            guard.check_definitions(reader.con, snapshot.path.name)
        except BaseException:
            reader.con.close()
            raise
        con = reader.cursor()
        kept = tuple(publishes(con)) if with_history else ()
        change_files = ChangeFiles(snapshot.path.parent) if with_history else None
        if change_files is not None:  # the files every walk begun from now on reads
            change_files.open_all(snapshot.version)
        return ServingState(
            version=snapshot.version,
            path=snapshot.path,
            published_at=snapshot.path.stat().st_mtime,
            catalog=load_catalog(con),
            small=load_small_answers(con),
            lists=_load_lists(reader, snapshot, cache_bytes),
            reader=reader,
            lease=lease,
            publishes=kept,
            mirror=mirror_id(con) if with_history else "",
            horizons=horizons(con) if with_history else {},
            times=load_record_times(con, kept),
            change_files=change_files,
        )
    except BaseException:
        lease.release()
        raise


def _load_lists(
    reader: SnapshotReader, snapshot: snapshots.Snapshot, cache_bytes: int
) -> dict[str, PositionedList]:
    """Every large list of the snapshot: a list paged by number is mapped from a record file
    (a page is one slice); a list paged by cursor keeps its ids, to break ties of its time
    key, and reads records by position through its cache."""
    lists: dict[str, PositionedList] = {}
    for stream in STREAMS:
        if stream.numbered_list is None:
            continue
        table, base = stream.numbered_list
        by_cursor = stream.serving == Serving.CURSOR_LIST
        record_file = None if by_cursor else snapshot.path
        lists[stream.name] = load_list(
            reader, table, base, by_cursor, cache_bytes, record_file, stream.feed_key_column
        )
    return lists


class LiveSnapshot:
    """Holds the current ServingState. Once ``watch`` is called, a thread looks at the folder's
    ``CURRENT`` pointer every ``check_interval_s`` and swaps in each new publish, whether
    requests come or not; a replica's follower (``follow``) does so from the object store
    instead. Each swap is announced to the folder (``ductwork.serving_workers``)."""

    def __init__(
        self,
        snapshots_dir: Path,
        check_interval_s: float = CHECK_INTERVAL_S,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self._dir = snapshots_dir
        self._interval = check_interval_s
        self._cache_bytes = cache_bytes
        self._state: ServingState | None = None
        self._confirmed: tuple[str, float] | None = None
        self._loading = threading.Lock()
        self._follower: StoreFollower | None = None
        self._closed = False
        self._stopping = threading.Event()
        self._waiters = PublishWaiters()
        self._watcher: threading.Thread | None = None
        self._announced = False
        self._refused: set[str] = set()  # the file names of snapshots refused
        self.refusal: str | None = None  # why the newest snapshot is not served, if it is not
        self._sync_times = sync_times.FolderSyncTimes(snapshots_dir)
        # The folder's erasures, looked for with the pointer (``serve.erasures``).
        self.erasures = Erasures(snapshots_dir)

    def follow(self, store: SnapshotStore, poll_s: float) -> None:
        """Serve what the object store's pointer names from now on, checking every ``poll_s``
        in a background thread (``watch`` then starts no watcher of its own)."""
        self._follower = StoreFollower(
            store, self._dir, poll_s, self._after_fetch, self._refused, self._refuse
        )
        self._follower.start()

    def watch(self) -> None:
        """Swap in every new publish of the local folder from now on, in a background thread
        that looks at the pointer every check interval (not on a replica: its follower does)."""
        if self._follower is None and self._watcher is None and not self._closed:
            self._watcher = threading.Thread(
                target=self._watch, name="publish-watcher", daemon=True
            )
            self._watcher.start()

    def get(self) -> ServingState | None:
        """The state to answer one request from (None before the first publish)."""
        return self._state

    async def wait_for_newer(self, version: str, timeout_s: float) -> ServingState | None:
        """The state once a snapshot other than ``version`` is served, or None after
        ``timeout_s``. Waiting requests wake when the worker swaps snapshots; they cost
        nothing meanwhile (the watcher or the follower looks for publishes anyway)."""
        waiting = self._waiters.add()  # before looking: a swap from now on wakes it
        try:
            state = self._state
            if state is not None and state.version != version:
                return state
            await asyncio.wait_for(asyncio.shield(waiting), timeout_s)
        except TimeoutError:
            return None
        finally:
            self._waiters.discard(waiting)
        return self._state

    def publish_pending(self) -> bool:
        """Whether the folder's pointer names a snapshot to load (not the one served, nor one
        refused): one read of the pointer."""
        return self._wanted(snapshots.current(self._dir))

    def catch_up(self, wait_s: float) -> ServingState | None:
        """The state after swapping in the folder's current snapshot if it is not the one
        served: loaded here, or by the watcher when it is already loading (waited for at most
        ``wait_s``). A blocking call."""
        try:
            self._reload_from_folder(wait_s)
        except Exception:
            log.exception("could not load the newest snapshot; still serving the previous one")
        return self._state

    def _watch(self) -> None:
        """Every check interval: one stat of the pointer; when it was rewritten, read it and
        load what it names. A load that failed is tried again after ``RETRY_S``."""
        seen: tuple[int, int, int] | None = None
        retry_at = math.inf
        while not self._stopping.wait(self._interval):
            self._sync_times.refresh()
            self.look_for_erasures()
            pointer = _identity(self._dir / snapshots.POINTER)
            if pointer == seen and time.monotonic() < retry_at:
                continue
            seen, retry_at = pointer, math.inf
            try:
                self._reload_from_folder()
            except Exception:
                log.exception("could not load the newest snapshot; still serving the previous one")
                retry_at = time.monotonic() + RETRY_S

    def _after_fetch(self) -> None:
        """After a replica's poll of the store: the new snapshot, if any, then any erasure."""
        self._reload_from_folder()
        self.look_for_erasures()

    def look_for_erasures(self) -> bool:
        """One stat of the folder's erasure marker; when it was rewritten, the change files
        the served state opened are let go (the current publish's may have been rewritten),
        and the keepers of earlier publishes' answers and states drop them as they next look
        (``serve.erasures``). Whether there was a new erasure."""
        if not self.erasures.look():
            return False
        state = self._state
        if state is not None and state.change_files is not None:
            state.change_files.forget()
        log.info("an erasure: what was kept of earlier publishes is dropped")
        return True

    def age_seconds(self, state: ServingState) -> float:
        """Seconds since a sync last published or confirmed ``state``'s snapshot as current."""
        return time.time() - self._confirmed_at(state)

    def _confirmed_at(self, state: ServingState) -> float:
        moment = state.published_at
        if self._confirmed is not None and self._confirmed[0] == state.version:
            moment = max(moment, self._confirmed[1])
        return moment

    def synced_at(self, stream: str, state: ServingState) -> float:
        """When ``stream`` last synced successfully (epoch seconds); without a time of its own
        (publishes that wrote none), when a sync last published or confirmed ``state``."""
        found = self._sync_times.times.get(stream)
        return found if found is not None else self._confirmed_at(state)

    def sync_times(self, state: ServingState) -> dict[str, float]:
        """Every stream's ``synced_at``."""
        return {stream.name: self.synced_at(stream.name, state) for stream in STREAMS}

    def load_now(self) -> ServingState | None:
        """Load the folder's current snapshot synchronously if it is not the one served (at
        start-up), and take note of the pointer's confirmation time; the state served."""
        self._reload_from_folder()
        return self._state

    def close(self) -> None:
        """Stop serving: stop looking for publishes, withdraw this worker's announcement, close
        the current snapshot, and hand the objects frozen at each load back to the collector,
        so that nothing of DuckDB's is left for interpreter shutdown to destroy."""
        self._stopping.set()
        if self._follower is not None:
            self._follower.stop()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=STOP_WAIT_S)  # a load under way is waited for below
        with self._loading:  # not while a background load is swapping one in
            self._closed = True
            state, self._state = self._state, None
        if self._announced:
            serving_workers.withdraw(self._dir)
        if state is not None:
            state.close()
        gc.unfreeze()

    def _swap(self, state: ServingState) -> None:
        """Serve from ``state`` from now on and give up the lease on the previous snapshot
        (requests already answering from it finish through its open connection)."""
        previous, self._state = self._state, state
        self.refusal = None
        if previous is not None:
            previous.lease.release()
        self._waiters.wake()
        self._announce(state.version)
        # The indexes of a snapshot are hundreds of thousands of long-lived objects; kept out of
        # the collector's sight, a full collection no longer walks them all in the middle of
        # a request (the tail latency of every answer). They are still freed by reference
        # counting when the state is dropped.
        gc.freeze()

    def _announce(self, version: str) -> None:
        """Tell the folder which snapshot this worker serves; a folder this worker may not
        write to (a read API run by another user of the group) only loses the announcement."""
        try:
            serving_workers.announce(self._dir, version)
        except OSError as exc:
            log.warning("could not announce the snapshot this worker serves: %s", exc)
            return
        self._announced = True

    def _wanted(self, snap: snapshots.Snapshot | None) -> bool:
        """Whether ``snap`` is to be loaded: not the one served, nor one refused before."""
        if snap is None or snap.path.name in self._refused:
            return False
        return self._state is None or snap.version != self._state.version

    def _load(self, snap: snapshots.Snapshot) -> ServingState | None:
        """The state of ``snap``, or None when the guard refuses it (then reported)."""
        try:
            return load_state(snap, self._cache_bytes)
        except guard.SnapshotRefused as exc:
            self._refuse(exc)
            return None

    def _refuse(self, refused: guard.SnapshotRefused) -> None:
        """Remember that the snapshot is not to be served, and say why, once."""
        self._refused.add(refused.name)
        self.refusal = f"snapshot {snapshots.version_of(refused.name)} refused: {refused.why}"
        log.error("%s; still serving the previous snapshot, if any", self.refusal)

    def _reload_from_folder(self, wait_s: float | None = None) -> None:
        """Swap in the local folder's current snapshot if it is not the one served, in the
        calling thread (requests keep answering from the previous state meanwhile). Another
        load under way is waited for, at most ``wait_s`` (None: as long as it takes)."""
        pointed = snapshots.current(self._dir)
        self._note_confirmation(pointed)
        if not self._wanted(pointed):
            return
        if not self._loading.acquire(timeout=-1 if wait_s is None else wait_s):
            return
        try:
            # Read again under the lock: another thread may have swapped it in meanwhile, or
            # the pointer may have moved on.
            snap = snapshots.current(self._dir)
            if self._closed or snap is None or not self._wanted(snap):
                return
            state = self._load(snap)
            if state is None:
                return
            self._swap(state)
        finally:
            self._loading.release()
        log.info("serving snapshot %s", snap.version)

    def _note_confirmation(self, snap: snapshots.Snapshot | None) -> None:
        self._sync_times.refresh()
        confirmed = snapshots.confirmed_at(self._dir)
        if snap is not None and confirmed is not None:
            self._confirmed = (snap.version, confirmed)


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What changes when ``path`` is rewritten (each publish renames a new file into place):
    its inode, modification time and size; None while it does not exist."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size


class PublishWaiters:
    """Requests waiting for a newer snapshot, each a future on its own event loop; woken from
    whichever thread swaps the snapshot in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def add(self) -> asyncio.Future[None]:
        """A future that completes at the next swap."""
        loop = asyncio.get_running_loop()
        waiting: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiting.append((loop, waiting))
        return waiting

    def discard(self, waiting: asyncio.Future[None]) -> None:
        """Stop waiting (woken, or given up)."""
        with self._lock:
            self._waiting = [(loop, f) for loop, f in self._waiting if f is not waiting]

    def wake(self) -> None:
        """Complete every waiting future, each on its own loop."""
        with self._lock:
            woken, self._waiting = self._waiting, []
        for loop, waiting in woken:
            loop.call_soon_threadsafe(_complete, waiting)


def _complete(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_result(None)


class StoreFollower:
    """A daemon thread that keeps the local folder on the object store's current snapshot and
    then calls ``on_change``; a failed check is logged and tried again at the next poll."""

    def __init__(
        self,
        store: SnapshotStore,
        snapshots_dir: Path,
        poll_s: float,
        on_change: Callable[[], None],
        refused: Container[str] = (),
        on_refused: Callable[[guard.SnapshotRefused], None] | None = None,
    ) -> None:
        self._store = store
        self._dir = snapshots_dir
        self._poll_s = poll_s
        self._on_change = on_change
        self._refused = refused
        self._on_refused = on_refused
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-follower", daemon=True)

    def start(self) -> None:
        """Check at once, then every poll interval."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (a download under way is not waited for beyond a few seconds)."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def check(self) -> None:
        """One poll: fetch what the store names, then reload if it changed. A download that
        does not match its checksum goes to ``on_refused`` and is not downloaded again."""
        try:
            fetch_current(self._store, self._dir, self._refused)
        except guard.SnapshotRefused as exc:
            if self._on_refused is None:
                raise
            self._on_refused(exc)
        self._on_change()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.check()
            except Exception as exc:
                log.warning("could not fetch the current snapshot from the store: %s", exc)
            self._stopped.wait(self._poll_s)
