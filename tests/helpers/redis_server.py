"""A throwaway Redis server on loopback: Debian's ``redis-server``, no persistence."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from sandbox.local_server import free_socket

NOT_INSTALLED = "Redis is not installed: apt-get install redis-server (make test does, as root)"
START_LIMIT_S = 15.0


@contextmanager
def running_redis(start_limit_s: float = START_LIMIT_S) -> Iterator[str]:
    """``redis-server`` on 127.0.0.1 at a free port, in a temporary folder, saving nothing to
    disk; yields ``redis://127.0.0.1:PORT/0`` once it answers PING, and stops it on leaving.

    Fails the test, never skips it, when the server is not installed.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(NOT_INSTALLED, pytrace=False)
    with free_socket() as sock:
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="redis-") as folder:
        process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", folder,
             "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"redis://127.0.0.1:{port}/0"
            _wait_for_ping(url, process, start_limit_s)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_for_ping(url: str, process: subprocess.Popen, limit_s: float) -> None:
    """Poll the server with PING until it answers; fail if it exits or time runs out."""
    client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {process.returncode}")
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise TimeoutError(f"redis-server did not answer PING within {limit_s:.0f}s")
    finally:
        client.close()
