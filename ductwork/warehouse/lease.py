"""The warehouse lease: one run at a time holds the DuckDB file, whoever started it.

DuckDB takes a single writer, and a run holds the warehouse from its first step to its last.
Runs start in several ways (``ductwork sync``, schedules, the UI, the read API's trigger), so
the lease is taken by the run's own process whatever started it: an exclusive ``flock`` on a
file beside the warehouse. The kernel drops the lock when the process ends however it ends
(SIGKILL, the OOM killer), so a dead run never keeps the warehouse; the file also records the
holder, so a waiting run can say whom it waits for.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from ductwork import file_modes

POLL_S = 0.5  # how often a waiting run retries the lock; a waiter sleeps in between
REPORT_EVERY_S = 10.0


@dataclass(frozen=True)
class Holder:
    """Who holds the lease: the run, its worker process and since when (UTC, ISO 8601)."""

    run_id: str
    pid: int
    since: str

    def describe(self) -> str:
        """One line for logs and errors."""
        return f"run {self.run_id} (pid {self.pid}, since {self.since})"


class WarehouseBusy(RuntimeError):
    """The lease stayed with another run for longer than the wait allowed."""


class WaitStopped(RuntimeError):
    """The waiting run was asked to stop (canceled, or its process signalled)."""


class WarehouseLease:
    """An exclusive lease on the warehouse, held by one process at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lease."""
        return self._file is not None

    def try_acquire(self, run_id: str) -> bool:
        """Take the lease if no other process holds it; True when taken."""
        handle = _open_private(self.path)  # held for the lease
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        holder = Holder(run_id, os.getpid(), datetime.now(UTC).isoformat(timespec="seconds"))
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(asdict(holder)))
        handle.flush()
        self._file = handle
        return True

    def acquire(
        self,
        run_id: str,
        wait_s: float,
        report: Callable[[Holder | None, float], None],
        should_stop: Callable[[], bool] = lambda: False,
    ) -> float:
        """Take the lease, waiting up to ``wait_s`` seconds for its holder to let go.

        While waiting, ``report(holder, waited_s)`` is called at once and then about every
        ten seconds, and ``should_stop()`` about twice a second: when it holds, the wait ends
        with ``WaitStopped``. After ``wait_s`` the wait ends with ``WarehouseBusy`` naming the
        holder. Returns the seconds waited.
        """
        started = time.monotonic()
        next_report = started
        while not self.try_acquire(run_id):
            now = time.monotonic()
            waited = now - started
            if waited >= wait_s:
                holder = self.holder()
                held_by = holder.describe() if holder else "another run"
                raise WarehouseBusy(
                    f"the warehouse is still held by {held_by} after {waited:.0f} s "
                    "(DUCTWORK_WAREHOUSE_WAIT_S)"
                )
            if now >= next_report:
                report(self.holder(), waited)
                next_report = now + REPORT_EVERY_S
            if should_stop():
                raise WaitStopped("stopped while waiting for the warehouse")
            time.sleep(min(POLL_S, max(0.0, wait_s - waited)))
        return time.monotonic() - started

    def release(self) -> None:
        """Let the lease go (the holder record stays, for the next holder to overwrite)."""
        if self._file is not None:
            with suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def holder(self) -> Holder | None:
        """The last holder recorded; None when unknown."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
            return Holder(str(record["run_id"]), int(record["pid"]), str(record["since"]))
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def is_free(self) -> bool:
        """Whether no process holds the lease now (taken and let go at once to find out)."""
        with _open_private(self.path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        return True


def _open_private(path: Path) -> IO[str]:
    """The lease file, created with the data folder's file mode when missing."""
    modes = file_modes.current()
    modes.make_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, modes.file_mode)
    return open(fd, "a+", encoding="utf-8")


def lease_beside(database: Path) -> WarehouseLease:
    """The lease of the warehouse file ``database`` (a file beside it)."""
    return WarehouseLease(database.with_suffix(".lease"))
