"""Which process runs a run, recorded so that another process can tell whether it still lives.

A process id alone is not enough: the kernel reuses ids, so a long-dead run could look alive
because an unrelated process got its number. The process's start time (in clock ticks since
boot, from ``/proc``) makes the pair unique for as long as the host is up, and the host name
keeps a run recorded on one machine from being judged on another.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunWorker:
    """A process on a host, identified well enough to tell whether it is still running."""

    host: str
    pid: int
    started: int  # clock ticks after boot; 0 where /proc cannot tell

    @classmethod
    def current(cls) -> RunWorker:
        """This process."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start_ticks(pid) or 0)

    @classmethod
    def parse(cls, text: str | None) -> RunWorker | None:
        """The worker written by ``str()``; None for a missing or malformed value."""
        if not text:
            return None
        host, _, rest = text.rpartition("/")
        pid, _, started = rest.partition("@")
        if not host or not pid.isdigit() or not started.isdigit():
            return None
        return cls(host, int(pid), int(started))

    def __str__(self) -> str:
        return f"{self.host}/{self.pid}@{self.started}"

    @property
    def on_this_host(self) -> bool:
        """Whether this process can judge the worker's liveness."""
        return self.host == socket.gethostname()

    def is_alive(self) -> bool:
        """Whether the process still runs (asked on its own host only)."""
        started = process_start_ticks(self.pid)
        if started is None:
            return False
        return self.started == 0 or started == self.started


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name, from the state on (state,
    ppid, pgrp, session, ...; field n of proc(5) is item n - 3); None when there is no such
    process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    return stat[stat.rfind(")") + 2 :].split()


def process_start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks after boot; None when it does not exist."""
    fields = proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):  # a zombie has finished; only its status is left
        return None
    return int(fields[19])
