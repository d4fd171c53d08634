"""``ductwork serve`` as operators start it: a process group of its own on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import httpx

from sandbox.local_server import HOST, free_socket

ROOT = Path(__file__).parent.parent.parent  # the repository
READY_LIMIT_S = 120.0


@dataclass(frozen=True)
class RunningApi:
    """``ductwork serve`` in a process group of its own."""

    url: str
    process: subprocess.Popen


def start_serve(
    home: Path,
    workers: int,
    settings: dict[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    root: Path = ROOT,
    until: Literal["ready", "answering"] = "ready",
) -> RunningApi:
    """Start ``ductwork serve --workers N`` on a free port over ``home`` and wait until it is
    ready (``until="answering"``: until ``/readyz`` answers at all). ``settings`` are extra
    ``DUCTWORK_*`` variables (or any others the process takes); ``stdout`` takes its access
    log, ``stderr`` its other logs; ``root`` is the checkout it runs from.

    Unless ``settings`` say otherwise, the per-key limit and the limit of failed requests are
    high enough never to refuse."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # uvicorn binds it again; the kernel does not hand it out meanwhile in practice
    env = {
        **os.environ,
        "DUCTWORK_HOME": str(home),
        "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000000",
        "DUCTWORK_SERVE_FAILED_REQUESTS_PER_SECOND": "1000000",
        **(settings or {}),
    }
    command = [sys.executable, "-m", "pipelines.cli", "serve"]
    process = subprocess.Popen(
        [*command, "--host", HOST, "--port", str(port), "--workers", str(workers)],
        cwd=root, env=env, start_new_session=True, stdout=stdout, stderr=stderr,
    )  # fmt: skip
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, "ductwork serve exited during start-up"
        try:
            status = httpx.get(f"{url}/readyz", timeout=5).status_code
            if status == 200 or until == "answering":
                return RunningApi(url, process)
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_serve(RunningApi(url, process))
    raise AssertionError(f"ductwork serve did not become ready within {READY_LIMIT_S:.0f} s")


def stop_serve(api: RunningApi) -> None:
    """Stop the server and its worker processes (its own process group only)."""
    os.killpg(api.process.pid, signal.SIGTERM)
    try:
        api.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(api.process.pid, signal.SIGKILL)
        api.process.wait(timeout=30)


@contextmanager
def serving_process(
    home: Path,
    workers: int,
    settings: dict[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    root: Path = ROOT,
) -> Iterator[RunningApi]:
    """``start_serve`` for the block; stopped on leaving."""
    api = start_serve(home, workers, settings, stdout, stderr, root)
    try:
        yield api
    finally:
        stop_serve(api)
