"""Leases on snapshot files: a reader holds one for as long as it serves from a snapshot,
and pruning never deletes a leased file."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Lease:
    """A shared lock on a snapshot file, held by a reader for as long as it serves from it;
    ``prune`` never deletes a leased snapshot."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = os.open(path, os.O_RDONLY)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Let the snapshot go (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops its lock
            self._fd = None


def in_use(path: Path) -> bool:
    """Whether some reader holds a lease (or a publish or a record file's writer its lock) on
    ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
