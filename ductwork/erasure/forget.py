"""``ductwork forget``, start to finish: erase a stream's keys in the warehouse, publish a
snapshot without them, remove the older copies that hold them, and log the erasure.

Crash safety: the request is first written to a pending file in the data folder (0600: it
names the keys), removed only once everything is done. The warehouse's erasure is one
transaction, and so is the publish's (which erases again what it brings back of the history,
and logs the deletes); a snapshot is made current only once whole. So a ``forget`` stopped at
any point leaves the published mirror as it was or erased, and running the same command again
(or any ``forget``: the pending request is finished first) completes the work.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb

from ductwork import file_modes, snapshots
from ductwork.erasure import audit
from ductwork.erasure.warehouse import erase_in_publish, erase_rows, lift
from ductwork.history.recording import Erase
from ductwork.settings import (
    HistorySettings,
    HomeSettings,
    RunSettings,
    S3Settings,
    SnapshotStoreSettings,
    load,
)
from ductwork.snapshots import sync_times
from ductwork.streams.registry import stream_named
from ductwork.warehouse.lease import Holder, lease_beside
from ductwork.warehouse.opening import prepare_connection

PENDING = "erasure-pending.json"


@dataclass(frozen=True)
class Request:
    """One erasure asked for: its id (for the audit log), the stream, the keys, the reason,
    and whether to suppress the keys."""

    stream: str
    keys: tuple[str, ...]
    reason: str
    suppress: bool
    erasure_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def same_work(self, other: Request) -> bool:
        """Whether ``other`` asks for the same erasure (its id and reason aside)."""
        return (self.stream, sorted(self.keys), self.suppress) == (
            other.stream,
            sorted(other.keys),
            other.suppress,
        )


@dataclass(frozen=True)
class Outcome:
    """A finished erasure: the snapshot published without the keys, the rows removed by table,
    the copies removed by kind, and the keys' keyed hashes."""

    erasure_id: str
    version: str
    removed: dict[str, int]
    copies: dict[str, int]
    key_hashes: list[str]


def pending_path(home: Path) -> Path:
    """The data folder's pending erasure request."""
    return home / PENDING


def read_pending(home: Path) -> Request | None:
    """The erasure that was started and not finished, if any."""
    try:
        raw = json.loads(pending_path(home).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return Request(
        str(raw["stream"]),
        tuple(str(key) for key in raw["keys"]),
        str(raw["reason"]),
        bool(raw["suppress"]),
        str(raw["erasure_id"]),
    )


def write_pending(home: Path, request: Request) -> None:
    """Write the request (0600, whatever the folder's group rule: it names the keys)."""
    path = pending_path(home)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps({**asdict(request), "keys": list(request.keys)}).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    file_modes.fsync(home)


def clear_pending(home: Path) -> None:
    """Remove the pending request: the erasure is done."""
    pending_path(home).unlink(missing_ok=True)
    file_modes.fsync(home)


def pending_for(home: HomeSettings, request: Request) -> tuple[Request | None, Request]:
    """Before an erasure starts: the unfinished erasure to finish first (None: none, or the
    same one), and the request to carry out (the unfinished one itself when it asks the same,
    so that it keeps its id in the audit log)."""
    file_modes.current().make_private_dir(home.home)
    unfinished = read_pending(home.home)
    if unfinished is None:
        return None, request
    if unfinished.same_work(request):
        return None, unfinished
    return unfinished, request


def forget(
    home: HomeSettings, request: Request, report: Callable[[str], None] = lambda _: None
) -> Outcome:
    """Carry out ``request`` (after any unfinished one) in this process, under the
    warehouse's lease (``ductwork forget`` runs ``carry_out`` in a Dagster run instead)."""
    earlier, request = pending_for(home, request)
    if earlier is not None:
        report("finishing an earlier erasure that was stopped before it ended")
        with _Warehouse(home, f"forget-{earlier.erasure_id}", report) as con:
            carry_out(con, home, earlier)
    write_pending(home.home, request)
    with _Warehouse(home, f"forget-{request.erasure_id}", report) as con:
        return carry_out(con, home, request)


def carry_out(
    con: duckdb.DuckDBPyConnection,
    home: HomeSettings,
    request: Request,
    store: Callable[[snapshots.Snapshot], None] | None = None,
) -> Outcome:
    """Carry out the pending ``request`` on the warehouse ``con`` (held under its lease by the
    caller): erase, publish (then ``store``, default: the object store's publish), remove the
    older copies, log the erasure, and clear the pending request."""
    stream = stream_named(request.stream)
    keys = list(request.keys)
    in_publish: dict[str, int] = {}
    removed = erase_rows(con, stream, keys, request.suppress)
    history = load(HistorySettings)
    erase = erase_in_publish(stream, keys, in_publish)
    published = snapshots.publish(
        con, home.snapshots_dir, history.keep(), history.stream_keeps(), erase=erase
    )
    snapshots.prune(home.snapshots_dir)
    (store or (lambda snapshot: _publish_to_store(home, snapshot)))(published.snapshot)
    for table, count in in_publish.items():
        removed[table] = removed.get(table, 0) + count
    # Imported here: it reads the object store (boto3) and change files (Arrow), which a sync
    # that imports this module for its publish's pending erasure never needs.
    from ductwork.erasure.copies import erase_copies

    removed_copies = erase_copies(home, stream.name, keys)
    hashes = audit.keyed_hashes(home.home, keys)
    if not audit.logged(home.home, request.erasure_id):
        line = audit.entry(
            request.erasure_id, stream.name, hashes, request.reason, removed, removed_copies,
            request.suppress,
        )  # fmt: skip
        audit.append(home.home, line)
    clear_pending(home.home)
    return Outcome(request.erasure_id, published.snapshot.version, removed, removed_copies, hashes)


def unfinished_erasure(con: duckdb.DuckDBPyConnection, home: Path) -> Erase | None:
    """For a sync's publish: the erasure a ``forget`` stopped before it ended, applied again
    to the warehouse (``con``, held by the run), and what the publish must erase in its own
    transaction (None when there is none). The sync then publishes the erased state, never
    the warehouse's half of it; ``forget`` run again still finishes the rest (older copies,
    the audit log)."""
    request = read_pending(home)
    if request is None:
        return None
    stream = stream_named(request.stream)
    keys = list(request.keys)
    erase_rows(con, stream, keys, request.suppress)
    return erase_in_publish(stream, keys, {})


def lift_suppression(
    home: HomeSettings, stream_name: str, keys: list[str], report: Callable[[str], None]
) -> list[str]:
    """Lift the suppression of the keys (the next sync brings their records back); the keys
    that were suppressed."""
    stream = stream_named(stream_name)
    with _Warehouse(home, f"forget-lift-{uuid.uuid4().hex}", report) as con:
        return lift(con, stream, keys)


class _Warehouse:
    """The working warehouse, opened under its lease (waiting for a running sync)."""

    def __init__(self, home: HomeSettings, run_id: str, report: Callable[[str], None]) -> None:
        self.lease = lease_beside(home.warehouse_path)
        self.path = home.warehouse_path
        self.run_id = run_id
        self.report = report
        self.con: duckdb.DuckDBPyConnection | None = None

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        def waiting(holder: Holder | None, waited: float) -> None:
            held_by = holder.describe() if holder else "another run"
            self.report(f"waiting for the warehouse, held by {held_by} ({waited:.0f} s)")

        self.lease.acquire(self.run_id, load(RunSettings).warehouse_wait_s, waiting)
        try:
            self.con = duckdb.connect(str(self.path))
            prepare_connection(self.con, parallel=True)
        except BaseException:
            self.lease.release()
            raise
        return self.con

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.con is not None:
                self.con.close()
        finally:
            self.lease.release()


def _publish_to_store(home: HomeSettings, snapshot: snapshots.Snapshot) -> None:
    """Point the object store (``DUCTWORK_SNAPSHOT_STORE``) at the new snapshot, as a sync's
    publish does, with the streams' sync times unchanged."""
    url = load(SnapshotStoreSettings).snapshot_store
    if url is None:
        return
    from ductwork.snapshots.store import SnapshotStore

    synced = sync_times.encode(sync_times.read(home.snapshots_dir))
    SnapshotStore.connect(url, load(S3Settings)).publish(snapshot, synced)
