"""Which snapshot each read-API worker on this host answers from, told through the data folder.

Every worker of ``ductwork serve`` keeps one file, ``snapshots/.serving/<pid>``, holding the
version it serves; it rewrites the file each time it swaps a snapshot in and removes it when it
stops. A publishing run reads these files to hold its notifications until every local worker
serves what they announce. A worker that died without removing its file is not waited for: a
file whose pid no longer runs is ignored (and removed).

Only this host's workers are seen: a replica in another folder (or another pid namespace) is
not, and follows the object store at its own pace.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ductwork import file_modes

FOLDER = ".serving"


def _folder(snapshots_dir: Path) -> Path:
    return snapshots_dir / FOLDER


def announce(snapshots_dir: Path, version: str, pid: int | None = None) -> None:
    """Say that the worker ``pid`` (this process by default) now answers from ``version``."""
    folder = file_modes.current().make_private_dir(_folder(snapshots_dir))
    file_modes.write_atomically(folder / str(pid or os.getpid()), version)


def withdraw(snapshots_dir: Path, pid: int | None = None) -> None:
    """Say that the worker ``pid`` (this process by default) no longer serves."""
    with contextlib.suppress(FileNotFoundError):
        (_folder(snapshots_dir) / str(pid or os.getpid())).unlink()


def serving(snapshots_dir: Path) -> dict[int, str]:
    """The version each running local worker serves, by pid; files of workers that no longer
    run are removed."""
    found: dict[int, str] = {}
    try:
        entries = list(os.scandir(_folder(snapshots_dir)))
    except FileNotFoundError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue  # a file being written (its temporary name starts with a dot)
        pid = int(entry.name)
        if not _running(pid):
            withdraw(snapshots_dir, pid)
            continue
        try:
            found[pid] = Path(entry.path).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            continue  # withdrawn meanwhile
    return found


def behind(snapshots_dir: Path, version: str) -> dict[int, str]:
    """The running local workers that serve a snapshot older than ``version`` (versions sort
    by their publish time), with what each serves."""
    return {pid: served for pid, served in serving(snapshots_dir).items() if served < version}


def wait_until_served(
    snapshots_dir: Path, version: str, timeout_s: float, poll_s: float = 0.05
) -> dict[int, str]:
    """Wait until every running local worker serves ``version`` or a newer snapshot, at most
    ``timeout_s``; returns the workers still behind (empty when all caught up, or when none
    runs)."""
    deadline = time.monotonic() + timeout_s
    while True:
        late = behind(snapshots_dir, version)
        if not late or time.monotonic() >= deadline:
            return late
        time.sleep(poll_s)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it runs
    return True
