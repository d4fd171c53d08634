"""Pruning a snapshots folder: the snapshots beyond those kept, with the files written beside
them (checksums, record files, change files), and what killed publishes and writers left."""

from __future__ import annotations

import time
from contextlib import suppress
from pathlib import Path

from ductwork.history.change_file_names import CHANGES_PARTIAL, CHANGES_PREFIX
from ductwork.snapshots import guard
from ductwork.snapshots.folder import (
    POINTER,
    PREFIX,
    PUBLISH_LOCK,
    STAGING_PREFIX,
    SUFFIX,
    current,
    version_of,
)
from ductwork.snapshots.leases import in_use
from ductwork.snapshots.record_files import (
    RECORDS_LOCK,
    RECORDS_PARTIAL,
    RECORDS_PREFIX,
    record_file_names,
)
from ductwork.snapshots.stamp import STAMP


def prune(snapshots_dir: Path, keep: int = 3, grace_s: float = 600.0) -> list[Path]:
    """Delete snapshots beyond the newest ``keep`` that were replaced over ``grace_s`` ago.

    A snapshot was replaced when the next newer one was published. A snapshot that a reader
    still leases (see ``Lease``) is kept whatever its age; the grace period covers a reader
    that read the ``CURRENT`` pointer just before a publish and has not taken its lease yet.
    The record files and change files written beside a snapshot (``record_file_name``,
    ``change_file_name``) go with it; those of a snapshot that stays are kept.
    """
    live = current(snapshots_dir)
    files = sorted(snapshots_dir.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)
    published = [path.stat().st_mtime for path in files]
    removed = []
    now = time.time()
    for index in range(max(keep, 1), len(files)):
        path = files[index]
        if live is not None and path == live.path:
            continue
        if now - published[index - 1] > grace_s and not in_use(path):
            path.unlink(missing_ok=True)
            guard.checksum_path(path).unlink(missing_ok=True)
            removed.append(path)
    # Copies (and pointer and stamp drafts) left by a publish that was killed part way; never
    # made current. While some publish holds the lock, only those older than the grace period go.
    # Listed before the lock is tried: the drafts of a publish that begins after the listing are
    # not in it, and one that began before holds the lock.
    leftovers = [
        *snapshots_dir.glob(f"{STAGING_PREFIX}*{SUFFIX}*"),
        *_orphan_checksums(snapshots_dir),
        *snapshots_dir.glob(f".{POINTER}.*"),
        *snapshots_dir.glob(f".{STAMP}.*"),
    ]
    publishing = in_use(snapshots_dir / PUBLISH_LOCK)
    for path in leftovers:
        if not publishing or _older_than(path, now, grace_s):
            with suppress(FileNotFoundError):  # renamed into place, or removed, since listed
                path.unlink()
                removed.append(path)
    removed += _prune_change_files(snapshots_dir, now, grace_s)
    return removed + _prune_record_files(snapshots_dir, now, grace_s)


def _orphan_checksums(snapshots_dir: Path) -> list[Path]:
    """Checksums written for a snapshot that never took its name (a publish or a download
    killed between the two)."""
    pattern = f"{PREFIX}*{SUFFIX}{guard.CHECKSUM_SUFFIX}"
    return [
        path
        for path in snapshots_dir.glob(pattern)
        if not path.with_name(path.name.removesuffix(guard.CHECKSUM_SUFFIX)).exists()
    ]


def _prune_record_files(snapshots_dir: Path, now: float, grace_s: float) -> list[Path]:
    """Remove the record files of snapshots no longer here, and the drafts of record files
    whose writer is gone (or has written nothing for over ``grace_s``).

    The record files are listed before the snapshots: a worker writes one only for a snapshot
    already in place (and leased), so the snapshot of every record file listed is in the
    listing that follows unless it was deleted. Likewise the drafts are listed before the lock
    is tried: a draft begun after the listing is not in it.
    """
    found = sorted(snapshots_dir.glob(f"{RECORDS_PREFIX}*"))
    writing = in_use(snapshots_dir / RECORDS_LOCK)
    kept = set()
    for snapshot in snapshots_dir.glob(f"{PREFIX}*{SUFFIX}"):
        with suppress(FileNotFoundError):  # pruned meanwhile by another process
            kept.update(record_file_names(snapshot))
    removed = []
    for path in found:
        if path.name.endswith(RECORDS_PARTIAL):
            if writing and not _older_than(path, now, grace_s):
                continue  # a write in progress
        elif path.name in kept:
            continue
        with suppress(FileNotFoundError):  # renamed into place, or removed by its writer
            path.unlink()
            removed.append(path)
    return removed


def _prune_change_files(snapshots_dir: Path, now: float, grace_s: float) -> list[Path]:
    """Remove the change files of publishes whose snapshot is no longer here (or never took
    its name), and drafts; while a publish holds the lock, only those older than ``grace_s``
    (it writes its files before its snapshot is in place).

    Listed before the snapshots: a publish that begins after the listing has no file in it."""
    found = sorted(snapshots_dir.glob(f"{CHANGES_PREFIX}*"))
    publishing = in_use(snapshots_dir / PUBLISH_LOCK)
    versions = {version_of(path.name) for path in snapshots_dir.glob(f"{PREFIX}*{SUFFIX}")}
    removed = []
    for path in found:
        version = path.name.removeprefix(CHANGES_PREFIX).partition(".")[0]
        if not path.name.endswith(CHANGES_PARTIAL) and version in versions:
            continue
        if publishing and not _older_than(path, now, grace_s):
            continue  # a publish writing its files
        with suppress(FileNotFoundError):  # removed by another process meanwhile
            path.unlink()
            removed.append(path)
    return removed


def _older_than(path: Path, now: float, grace_s: float) -> bool:
    """Whether ``path`` was last written over ``grace_s`` before ``now`` (a file gone since
    counts as old: there is nothing left to keep)."""
    try:
        return now - path.stat().st_mtime > grace_s
    except FileNotFoundError:
        return True
