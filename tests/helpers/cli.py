"""Running ``ductwork`` as operators do: a process with the data folder's environment."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from pathlib import Path

from ductwork.local_server import free_socket
from ductwork.settings import upstream_environment
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer

ROOT = Path(__file__).parent.parent.parent  # the repository


def ductwork(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
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
