"""``ductwork demo`` and ``ductwork dev`` stop everything they started on a stop signal, as a
service manager or a closing terminal sends it, and refuse to start on ports already taken."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from ductwork.run_worker import proc_stat
from pipelines.processes import ProcessGroup, wait_until_answering
from sandbox.local_server import free_socket
from tests.helpers.cli import ROOT, STARTUP_LIMIT_S, free_ports, read_lines

# What the commands promise: everything gone within this long of the first signal.
STOP_LIMIT_S = 10.0
UI_START_LIMIT_S = 180.0

Process = tuple[int, str]  # pid and start time: a pid alone may be reused


def process_tree(root: int) -> set[Process]:
    """``root`` and every live process descending from it."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            table[int(entry.name)] = stat
    chosen = {root}
    while more := {pid for pid, stat in table.items() if int(stat[1]) in chosen} - chosen:
        chosen |= more
    return {(pid, table[pid][19]) for pid in chosen if pid in table and table[pid][0] != "Z"}


def alive(processes: set[Process]) -> set[Process]:
    """Those of ``processes`` still running (a zombie has stopped running)."""
    left = set()
    for pid, started in processes:
        stat = proc_stat(pid)
        if stat is not None and stat[19] == started and stat[0] != "Z":
            left.add((pid, started))
    return left


def wait_gone(processes: set[Process], deadline: float) -> set[Process]:
    """Poll until every one of ``processes`` has ended or ``deadline`` passes; the survivors."""
    while (left := alive(processes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def describe(processes: set[Process]) -> list[str]:
    described = []
    for pid, _ in sorted(processes):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            command = b"?"
        described.append(f"{pid}: {command.decode(errors='replace')[:160]}")
    return described


def kill_leftovers(leader: subprocess.Popen, processes: set[Process]) -> None:
    """SIGKILL whatever a test started and is still running, so a failure leaks nothing."""
    for pid, _ in alive(processes | process_tree(leader.pid)):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with suppress(ProcessLookupError):
        os.killpg(leader.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=10)


class Output:
    """The lines a child prints (stdout and stderr together), read by a thread as they come."""

    def __init__(self, child: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=read_lines, args=(child.stdout, self._queue), daemon=True).start()

    def wait_for(self, text: str, timeout_s: float) -> str:
        """The first line containing ``text``, waiting for it at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.lines:
                if text in line:
                    return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line with {text!r} in time:\n" + "".join(self.lines))
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if not line:
                raise AssertionError(f"exited before printing {text!r}:\n" + "".join(self.lines))
            self.lines.append(line)


def start(args: list[str], home: Path, *, background: bool = False) -> subprocess.Popen:
    """``ductwork ARGS`` in a session of its own, as a service manager or a terminal runs it;
    ``background``: as a script's ``... &`` runs it, with SIGINT and SIGQUIT ignored."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=ROOT, env={**os.environ, "DUCTWORK_HOME": str(home)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=_ignore_interrupts if background else None,
    )  # fmt: skip


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def stop_and_check(
    leader: subprocess.Popen, output: Output, first: signal.Signals, second: signal.Signals
) -> set[Process]:
    """Send ``first`` to the leader's whole process group, then ``second`` while it cleans up;
    assert that everything it started has gone within the limit and that its exit code tells
    of ``first``. Returns the processes it had."""
    processes = process_tree(leader.pid)
    sent = time.monotonic()
    os.killpg(leader.pid, first)
    output.wait_for("stopping everything", STOP_LIMIT_S)
    os.killpg(leader.pid, second)
    try:
        code = leader.wait(timeout=STOP_LIMIT_S - (time.monotonic() - sent))
    except subprocess.TimeoutExpired:
        code = None
    left = wait_gone(processes, sent + STOP_LIMIT_S)
    assert not left, f"still running {STOP_LIMIT_S:.0f} s after {first.name}: {describe(left)}"
    assert code == 128 + first, "".join(output.lines[-40:])
    return processes


@pytest.fixture
def cleanup() -> Iterator[list[tuple[subprocess.Popen, set[Process]]]]:
    """Started commands (and the processes they had) to SIGKILL if a test leaves them behind."""
    started: list[tuple[subprocess.Popen, set[Process]]] = []
    yield started
    for leader, processes in started:
        kill_leftovers(leader, processes)


def test_demo_stops_its_whole_process_tree_on_sigterm_to_its_process_group(
    tmp_path: Path, cleanup: list[tuple[subprocess.Popen, set[Process]]]
) -> None:
    api, ui, sandbox, s3 = free_ports(4)
    demo = start(
        ["demo", "--scale", "tiny", "--api-port", str(api), "--ui-port", str(ui),
         "--sandbox-port", str(sandbox), "--s3-port", str(s3)],
        tmp_path / "home",
        # What its children inherit unless it resets them: dagster dev then ignores SIGTERM too.
        background=True,
    )  # fmt: skip
    seen: set[Process] = set()
    cleanup.append((demo, seen))
    output = Output(demo)
    output.wait_for("curl ", STARTUP_LIMIT_S)
    wait_until_answering(f"http://127.0.0.1:{ui}/server_info", demo, timeout_s=UI_START_LIMIT_S)
    seen |= process_tree(demo.pid)
    # The demo, the S3 server, the sandbox, the read API and dagster dev with its webserver,
    # daemon and code server(s).
    assert len(seen) >= 8, describe(seen)

    # A second SIGTERM arrives during the clean-up, as from a supervisor that forwards signals.
    stop_and_check(demo, output, signal.SIGTERM, signal.SIGTERM)
    for port in (api, ui, sandbox, s3):
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGHUP, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)],
    ids=["SIGHUP", "SIGINT"],
)
def test_dev_stops_dagster_dev_and_all_its_processes(
    first: signal.Signals,
    second: signal.Signals,
    tmp_path: Path,
    cleanup: list[tuple[subprocess.Popen, set[Process]]],
) -> None:
    (port,) = free_ports(1)
    dev = start(["dev", "--port", str(port)], tmp_path / "home")
    seen: set[Process] = set()
    cleanup.append((dev, seen))
    output = Output(dev)
    wait_until_answering(f"http://127.0.0.1:{port}/server_info", dev, timeout_s=UI_START_LIMIT_S)
    seen |= process_tree(dev.pid)
    # ductwork dev, dagster dev, its webserver, daemon and code server(s).
    assert len(seen) >= 5, describe(seen)

    stop_and_check(dev, output, first, second)


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something else listens on."""
    with free_socket() as sock:
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("which", ["--api-port", "--ui-port", "--sandbox-port", "--s3-port"])
def test_a_taken_port_refuses_the_demo_before_it_starts_anything(
    which: str, taken: int, tmp_path: Path
) -> None:
    flags = ["--api-port", "--ui-port", "--sandbox-port", "--s3-port"]
    ports = dict(zip(flags, free_ports(4), strict=True))
    ports[which] = taken
    args = ["demo", "--scale", "tiny"] + [f"{flag}={port}" for flag, port in ports.items()]
    _assert_refused(args, taken, tmp_path)


def test_a_taken_port_refuses_dev(taken: int, tmp_path: Path) -> None:
    _assert_refused(["dev", "--port", str(taken)], taken, tmp_path)


def _assert_refused(args: list[str], port: int, tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=ROOT, env={**os.environ, "DUCTWORK_HOME": str(home)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ductwork: ") and f"port {port} " in lines[0], lines[0]
    assert "already in use on 127.0.0.1" in lines[0]
    assert not home.exists(), "it set up its data folder before checking its ports"


def test_stop_all_kills_what_ignores_sigterm_even_outside_the_childs_session(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "grandchild.pid"
    grandchild = (
        "import os, signal, time, pathlib\n"
        "os.setsid()\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(marker)!r}).write_text(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    child = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        "time.sleep(120)\n"
    )
    group = ProcessGroup(grace_s=1.0)
    with group:
        parent = group.start([sys.executable, "-c", child])
        deadline = time.monotonic() + 30
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "the grandchild did not start"
            time.sleep(0.05)
        processes = process_tree(parent.pid)
        assert len(processes) == 2
        try:
            started = time.monotonic()
            group.stop_all()
            elapsed = time.monotonic() - started
        finally:
            for pid, _ in alive(processes):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert not alive(processes)
    assert elapsed < 5, elapsed


def test_children_start_with_default_stop_signals_though_the_parent_ignores_them() -> None:
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ProcessGroup() as group:
            child = group.start(["sleep", "60"])
            status = Path(f"/proc/{child.pid}/status").read_text()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    masks = dict(line.split(":\t") for line in status.splitlines() if line.startswith("Sig"))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        bit = 1 << (sig - 1)
        assert not int(masks["SigIgn"], 16) & bit, f"{sig.name} ignored"
        assert not int(masks["SigBlk"], 16) & bit, f"{sig.name} blocked"


def test_the_port_check_ignores_a_closed_connection_but_not_a_listener() -> None:
    from pipelines.processes import taken_port

    with free_socket() as sock:
        port = sock.getsockname()[1]
        sock.listen()
        assert taken_port("127.0.0.1", [("x", port)]) == (
            f"port {port} (x) is already in use on 127.0.0.1"
        )
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server's side closes first: TIME_WAIT on the server's port
            client.recv(1)
    assert taken_port("127.0.0.1", [("x", port)]) is None
