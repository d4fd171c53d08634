"""The files an erasure removes from a snapshots folder, and the marker it leaves there.

A snapshot goes with its checksum, its record files (``.records-*``, named after the file's
identity, so worked out before it is unlinked) and its publish's change files
(``.changes-<version>.<stream>``). A snapshot rebuilt for the past (``.past/past-*``) goes with
its checksum and record files.

The marker, ``ERASED`` beside ``CURRENT``, is rewritten (write-fsync-rename) after every
erasure with a random token and nothing else: every serving worker looks at it as it looks at
the pointer, and on a change drops what it keeps of earlier publishes (``serve.erasures``). A
replica copies the store's marker once it has dropped the local files the store no longer
names (``ductwork.snapshots.store.fetch_current``).
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ductwork import file_modes, snapshots
from ductwork.history import change_file_names
from ductwork.snapshots import guard, record_files

MARKER = "ERASED"
# The host's snapshots rebuilt for the past (``serve.past_states``, whose names these are:
# tests hold them equal), and the lock a rebuild holds.
PAST_FOLDER = ".past"
REBUILT_PREFIX = "past-"
REBUILD_LOCK = ".lock"


def read_marker(folder: Path) -> str | None:
    """The token of the last erasure marked in ``folder``; None when none was."""
    try:
        return (folder / MARKER).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def write_marker(folder: Path, token: str | None = None) -> str:
    """Mark an erasure in ``folder`` (``token``: the one to copy, else a new one); the token."""
    token = token or secrets.token_hex(16)
    file_modes.write_atomically(folder / MARKER, token)
    return token


def remove_snapshot(path: Path) -> list[Path]:
    """Remove the snapshot file ``path`` with its checksum, record files and change files; the
    paths removed. A reader that still has it open reads on until it lets it go."""
    folder = path.parent
    companions: list[Path] = []
    with suppress(FileNotFoundError):  # gone meanwhile: its record files cannot be named
        companions += [folder / name for name in record_files.record_file_names(path)]
    version = snapshots.version_of(path.name)
    companions += folder.glob(f"{change_file_names.CHANGES_PREFIX}{version}.*")
    companions += [guard.checksum_path(path), Path(f"{path}.wal")]
    removed = []
    for found in (path, *companions):
        with suppress(FileNotFoundError):
            found.unlink()
            removed.append(found)
    return removed


def rebuilt_snapshots(folder: Path) -> list[Path]:
    """The snapshots rebuilt for the past under ``folder`` (the snapshots' folder)."""
    return sorted((folder / PAST_FOLDER).glob(f"{REBUILT_PREFIX}*{snapshots.SUFFIX}"))


def remove_rebuilt(path: Path) -> list[Path]:
    """Remove the rebuilt snapshot ``path`` with its checksum and record files."""
    companions: list[Path] = []
    with suppress(FileNotFoundError):
        companions += [path.parent / name for name in record_files.record_file_names(path)]
    removed = []
    for found in (path, guard.checksum_path(path), Path(f"{path}.wal"), *companions):
        with suppress(FileNotFoundError):
            found.unlink()
            removed.append(found)
    return removed


@contextmanager
def no_rebuild(folder: Path) -> Iterator[None]:
    """Hold the host's rebuild lock (``.past/.lock``): no worker rebuilds a past snapshot
    meanwhile (one that tries is refused, as when another rebuilds); waits for one under way."""
    past = folder / PAST_FOLDER
    modes = file_modes.current()
    modes.make_private_dir(past)
    fd = os.open(past / REBUILD_LOCK, os.O_RDWR | os.O_CREAT, modes.file_mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops its lock


def drop_unnamed(folder: Path, named: set[str]) -> int:
    """On a replica: remove every snapshot file of ``folder`` whose name is not in ``named``
    (those the store holds), never the current one, and every rebuilt snapshot (rebuilt from a
    history that may have held what was erased); how many files of either kind went."""
    live = snapshots.current(folder)
    dropped = 0
    for path in folder.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}"):
        if path.name in named or (live is not None and path == live.path):
            continue
        if remove_snapshot(path):
            dropped += 1
    with no_rebuild(folder):
        for path in rebuilt_snapshots(folder):
            if remove_rebuilt(path):
                dropped += 1
    return dropped
