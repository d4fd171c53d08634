"""Running ``ductwork`` as operators do: a process with the data folder's environment."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ductwork.settings import upstream_environment
from pipelines.processes import wait_until_answering
from sandbox.local_server import free_socket
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer

ROOT = Path(__file__).parent.parent.parent  # the repository


def ductwork(
    *args: str, env: dict[str, str], timeout: float = 600, root: Path = ROOT
) -> subprocess.CompletedProcess:
    """``ductwork ARGS`` as a process, run from the checkout at ``root``."""
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def sync_env(home: Path, upstream: SandboxHandle, store: ObjectStoreServer, key: str) -> dict:
    return {
        **os.environ,
        "DUCTWORK_HOME": str(home),
        **upstream_environment(upstream.url, key, store.endpoint_url, store.bucket),
    }


STARTUP_LIMIT_S = 420.0


def free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out (released again for the demo's servers to bind)."""
    sockets = [free_socket() for _ in range(count)]
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def read_lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)
    into.put("")


@contextmanager
def dagster_dev(env: dict[str, str], start_limit_s: float, root: Path = ROOT) -> Iterator[str]:
    """``ductwork dev`` (webserver and daemon) of the checkout at ``root`` on a free loopback
    port; its URL once it answers. It runs in a session of its own, stopped whole on leaving."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "dev", "--port", str(port)],
        cwd=root, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until_answering(f"{url}/server_info", process, start_limit_s)
        yield url
    finally:
        stop_session(process, grace_s=60)


@contextmanager
def sync_holding_the_warehouse(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A ``ductwork sync`` process, yielded once it printed its first finished step (its run
    holds the warehouse then); killed whole on leaving if still running."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "sync"],
        cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("  ok  "):
                break
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def stop_session(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the process's session, then SIGKILL it after ``grace_s``."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
