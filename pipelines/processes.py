"""Child processes that are started together and always stopped together."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx

from ductwork import file_modes
from ductwork.ports import in_use
from ductwork.run_worker import proc_stat

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = PROJECT_ROOT / "workspace.yaml"

# The signals that stop a ProcessGroup's owner: Ctrl-C, a service manager, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Everything is gone within 10 s of a stop signal: this long for a clean stop, then SIGKILL.
GRACE_S = 6.0
KILL_WAIT_S = 2.0


def installed_command(name: str) -> str:
    """A console script of this environment (``dagster``, ``moto_server``), found beside the
    running interpreter, so it works without the environment's ``bin`` on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed in this environment: run make install")
    return found


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by the first stop signal a ProcessGroup receives."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class ProcessGroup(AbstractContextManager["ProcessGroup"]):
    """Starts children in sessions of their own and stops each whole session on exit.

    A session per child lets one signal reach everything it spawned (``dagster dev`` runs a
    webserver, a daemon and code servers), so nothing is left behind; whatever outlives
    ``grace_s`` after SIGTERM, anywhere in a child's session or process tree, gets SIGKILL.
    Further signals cannot interrupt that clean-up.

    With ``stop_on_signals``, the block also ends on SIGINT, SIGTERM or SIGHUP: the first one
    raises ``Stopped`` in the main thread (``signum`` records it), later ones are ignored.
    ``run_until_stopped`` wraps that up for a command.
    """

    def __init__(
        self, *, stop_on_signals: bool = False, name: str = "", grace_s: float = GRACE_S
    ) -> None:
        self._children: list[subprocess.Popen[bytes]] = []
        self._stop_on_signals = stop_on_signals
        self._name = name
        self._grace_s = grace_s
        self._stopping = False
        self._previous: dict[int, Callable | int | None] = {}
        self.signum: int | None = None

    def __enter__(self) -> ProcessGroup:
        if self._stop_on_signals:
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        if self._name:
            line = f"[{self._name}] {signal.Signals(signum).name}: stopping everything\n"
            # os.write, not print: the main thread may be inside a print right now.
            with suppress(OSError):
                os.write(2, line.encode())
        if not self._stopping:
            raise Stopped(signum)

    def start(
        self,
        command: Sequence[str],
        env: dict[str, str] | None = None,
        output: Path | None = None,
    ) -> subprocess.Popen:
        """Start ``command`` in a new session, with default signal handling. Its output and
        errors go to this process's, or, given ``output``, are appended to that file (made
        with the data folder's file mode)."""
        sink = None
        if output is not None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            sink = os.open(output, flags, file_modes.current().file_mode)
        try:
            # Blocked so that a stop signal cannot land between the fork and the bookkeeping,
            # which would leave a child that stop_all does not know about.
            with _stop_signals_blocked():
                child = subprocess.Popen(
                    list(command), env=env, start_new_session=True,
                    preexec_fn=_default_signals, stdout=sink, stderr=sink,
                )  # fmt: skip
                self._children.append(child)
        finally:
            if sink is not None:
                os.close(sink)
        return child

    def stop_all(self, grace_s: float | None = None) -> None:
        """SIGTERM every session, then SIGKILL whatever of them or their descendants is still
        alive after ``grace_s`` (the group's own by default). Idempotent. Stop signals that
        arrive meanwhile wait until it is done, and from then on are only recorded."""
        self._stopping = True
        with _stop_signals_blocked():
            children = list(reversed(self._children))
            if not children:
                return
            sessions = {child.pid for child in children}
            tree = _members(sessions)
            for child in children:
                _signal_group(child.pid, signal.SIGTERM)
            # One SIGTERM each: a second one would interrupt a child's own clean-up.
            for process in tree:
                if process.pgrp not in sessions:
                    process.send(signal.SIGTERM)
            deadline = time.monotonic() + (self._grace_s if grace_s is None else grace_s)
            for child in children:
                with suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=max(0.0, deadline - time.monotonic()))
            tree |= _members(sessions)
            while _alive(tree) and time.monotonic() < deadline:
                time.sleep(0.1)
                tree |= _members(sessions)
            for pid in sessions:
                _signal_group(pid, signal.SIGKILL)
            for process in tree | _members(sessions):
                process.send(signal.SIGKILL)
            deadline = time.monotonic() + KILL_WAIT_S
            for child in children:
                with suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=max(0.0, deadline - time.monotonic()))
            while _alive(tree) and time.monotonic() < deadline:
                time.sleep(0.05)
            self._children.clear()

    def close(self) -> None:
        """Stop every child, then put back the signal handlers this group replaced."""
        try:
            self.stop_all()
        finally:
            while self._previous:
                sig, handler = self._previous.popitem()
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def run_until_stopped(name: str, body: Callable[[ProcessGroup], int]) -> int:
    """Run ``body`` with a ProcessGroup that SIGINT, SIGTERM or SIGHUP stop, and stop every
    process it started however it ends. Returns ``body``'s exit code, or after a stop signal
    the shell's code for death by that signal (128 + its number: 130, 143, 129)."""
    group = ProcessGroup(stop_on_signals=True, name=name)
    status = 1
    try:
        with group:
            status = body(group)
    except Stopped:
        pass
    finally:
        # Again, in case the signal landed as the block's exit began, before stop_all ran.
        group.close()
    return status if group.signum is None else 128 + group.signum


def taken_port(host: str, ports: Sequence[tuple[str, int]]) -> str | None:
    """The first problem with binding every ``(label, port)`` on ``host``, in one line: a port
    given twice, or one that something already listens on. None when all are free."""
    labels: dict[int, str] = {}
    for label, port in ports:
        if port in labels:
            return f"port {port} is given for both the {labels[port]} and the {label}"
        labels[port] = label
        if port and in_use(host, port):
            return f"port {port} ({label}) is already in use on {host}"
    return None


def _default_signals() -> None:
    """In a new child before it runs its program: default handling of the stop signals.

    Ignored signals stay ignored across exec, and ``dagster dev`` maps SIGTERM to whatever
    SIGINT does, so a demo started in the background (SIGINT ignored) would otherwise leave
    children that neither SIGINT nor SIGTERM can stop.
    """
    for sig in (*STOP_SIGNALS, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass(frozen=True)
class _Process:
    """A process seen in /proc, identified by its pid and start time (pids get reused)."""

    pid: int
    started: str
    pgrp: int = field(compare=False)

    def alive(self) -> bool:
        stat = proc_stat(self.pid)
        return stat is not None and stat[19] == self.started and stat[0] != "Z"

    def send(self, sig: signal.Signals) -> None:
        if self.alive():
            with suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)


def _members(sessions: set[int]) -> set[_Process]:
    """Every live process in one of ``sessions`` or descending from a session leader; empty
    where there is no /proc (there, killing each session's process group has to do)."""
    table: dict[int, list[str]] = {}
    with suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
                table[int(entry.name)] = stat
    chosen = {pid for pid, stat in table.items() if int(stat[3]) in sessions}
    chosen |= sessions & table.keys()
    grew = True
    while grew:
        found = {pid for pid, stat in table.items() if int(stat[1]) in chosen} - chosen
        chosen |= found
        grew = bool(found)
    return {
        _Process(pid, table[pid][19], int(table[pid][2])) for pid in chosen if table[pid][0] != "Z"
    }


def _alive(processes: set[_Process]) -> set[_Process]:
    return {process for process in processes if process.alive()}


def wait_until_answering(
    url: str, child: subprocess.Popen | None = None, timeout_s: float = 120.0
) -> None:
    """Poll ``url`` until it answers any HTTP status; fail if the child exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise RuntimeError(f"{url}: the process serving it exited with {child.returncode}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f}s")
