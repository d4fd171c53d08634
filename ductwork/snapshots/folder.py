"""The folder of published snapshots: their file names, the ``CURRENT`` pointer to the one
readers open, and the lock a publish holds while it writes there.

A snapshot is an immutable DuckDB file, ``snapshot-<version>.duckdb``; a publish writes it under
a staging name and swaps the pointer with write-fsync-rename, so readers (the read API,
analysts) always open a complete snapshot read-only and never contend with a running sync.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ductwork import file_modes
from ductwork.snapshots import guard

POINTER = "CURRENT"


PREFIX = "snapshot-"


SUFFIX = ".duckdb"


STAGING_PREFIX = ".staging-"


PUBLISH_LOCK = ".publish.lock"


@dataclass(frozen=True)
class Snapshot:
    """One published snapshot."""

    version: str
    path: Path

    @property
    def published_at(self) -> datetime:
        """When it was published (from its file's modification time)."""
        return datetime.fromtimestamp(self.path.stat().st_mtime, UTC)


def version_of(name: str) -> str:
    """The version a snapshot's file name carries (``snapshot-<version>.duckdb``)."""
    return name.removeprefix(PREFIX).removesuffix(SUFFIX)


def new_version() -> str:
    """A sortable, unique version name: UTC time to the microsecond plus a random tail."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


@contextmanager
def publishing_lock(snapshots_dir: Path) -> Iterator[None]:
    """A shared lock on the publish lock file for as long as a publish writes.

    The system drops it when the process dies, however it dies, so ``prune`` can tell the
    staging copy of a publish that was killed (nobody holds the lock) from one being written.
    """
    mode = file_modes.current().file_mode
    fd = os.open(snapshots_dir / PUBLISH_LOCK, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops its lock


def confirmed_at(snapshots_dir: Path) -> float | None:
    """When a sync last published or confirmed the current snapshot (epoch seconds)."""
    try:
        return (snapshots_dir / POINTER).stat().st_mtime
    except FileNotFoundError:
        return None


def confirm(snapshots_dir: Path, at: float) -> None:
    """Date the pointer ``at`` (epoch seconds): when the current snapshot was last confirmed
    where it was published (a replica copies the object store's date)."""
    with suppress(FileNotFoundError):
        os.utime(snapshots_dir / POINTER, (at, at))


def current(snapshots_dir: Path) -> Snapshot | None:
    """The current snapshot, or None before the first publish."""
    try:
        name = (snapshots_dir / POINTER).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    path = snapshots_dir / name
    if not name.startswith(PREFIX) or not path.exists():
        return None
    return Snapshot(version_of(name), path)


def open_current(
    snapshots_dir: Path, config: dict[str, object] | None = None
) -> tuple[Snapshot, duckdb.DuckDBPyConnection]:
    """Open the current snapshot read-only, with DuckDB ``config`` settings applied as it opens
    (by default the settings every reader opens a snapshot with, ``guard.LOCKED``);
    raise FileNotFoundError before the first publish."""
    snap = current(snapshots_dir)
    if snap is None:
        raise FileNotFoundError(
            f"no published snapshot under {snapshots_dir}: run a sync first (ductwork sync)"
        )
    settings = dict(guard.LOCKED) if config is None else config
    return snap, duckdb.connect(str(snap.path), read_only=True, config=settings)
