"""The bench's open-loop load generator (bench/open_loop.py), run as the bench runs it: a
``python -m bench.open_loop`` process against a real HTTP server on loopback.

The server here is a minimal one of the test's own: it answers every request with a fixed
200 and closes each connection after its third answer, as a server may at any time between
requests (uvicorn closes one at its keep-alive timeout).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.local_server import free_socket

ROOT = Path(__file__).resolve().parents[1]
ANSWERS_PER_CONNECTION = 3
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class _ClosingAfterAFew(asyncio.Protocol):
    """Answers each request head; closes the connection after ``ANSWERS_PER_CONNECTION``."""

    def __init__(self, closed: list[int]) -> None:
        self.closed = closed
        self.buffer = b""
        self.answered = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            self.buffer = self.buffer[end + 4 :]
            self.transport.write(ANSWER)  # type: ignore[attr-defined]
            self.answered += 1
            if self.answered == ANSWERS_PER_CONNECTION:
                self.closed.append(1)
                self.transport.close()
                return


@pytest.fixture
def closing_server() -> Iterator[tuple[str, list[int]]]:
    """The server's URL, and a list that grows by one for each connection it closed."""
    sock = free_socket()
    sock.listen()
    closed: list[int] = []
    loop = asyncio.new_event_loop()

    async def serve() -> asyncio.Server:
        return await loop.create_server(lambda: _ClosingAfterAFew(closed), sock=sock)

    async def shut(server: asyncio.Server) -> None:
        server.close()
        await server.wait_closed()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", closed
    finally:
        asyncio.run_coroutine_threadsafe(shut(server), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_the_generator_sleeps_between_sends_and_replaces_each_connection_the_server_closes(
    closing_server: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, closed = closing_server
    paths = tmp_path / "paths.txt"
    paths.write_text("/a\n/b\n/c\n", encoding="utf-8")
    rate, seconds, connections = 60, 2, 16
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.open_loop", "--url", url, "--paths", str(paths),
         "--rate", str(rate), "--seconds", str(seconds), "--connections", str(connections)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    with child:  # closes its pipes
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            if child.poll() is None:
                child.kill()
        wall = time.perf_counter() - started
        assert child.stdout is not None and child.stderr is not None
        out, err = child.stdout.read().decode(), child.stderr.read().decode()
    assert os.waitstatus_to_exitcode(status) == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    # 120 requests taking turns over 16 connections that last three answers each: the first
    # 16 were closed after 48 requests, so the other 72 went over connections opened anew.
    assert len(closed) > connections
    assert result["answered"] == result["asked"] == rate * seconds
    assert result["statuses"] == {"200": rate * seconds}
    # Waiting between sends, not spinning: well under one core for the whole process.
    cpu = usage.ru_utime + usage.ru_stime
    assert cpu < 0.5 * wall, f"the generator used {cpu:.2f} s of CPU in {wall:.2f} s"


class _StallingFirst(asyncio.Protocol):
    """Holds its first answer ``STALL_S``, then answers at once: every request due meanwhile
    waits behind it on the generator's only connection."""

    stalled = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""
        self.held = 0  # answers owed while the first one is held

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            self.buffer = self.buffer[end + 4 :]
            if not _StallingFirst.stalled:
                _StallingFirst.stalled = True
                self.held += 1
                asyncio.get_running_loop().call_later(STALL_S, self._release)
            elif self.held:
                self.held += 1
            else:
                self.transport.write(ANSWER)  # type: ignore[attr-defined]

    def _release(self) -> None:
        self.transport.write(ANSWER * self.held)  # type: ignore[attr-defined]
        self.held = 0


STALL_S = 0.3


def test_the_generator_measures_each_latency_from_its_due_time_not_from_its_send(
    tmp_path: Path,
) -> None:
    sock = free_socket()
    sock.listen()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def serve() -> asyncio.Server:
        return await loop.create_server(_StallingFirst, sock=sock)

    server = asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    paths = tmp_path / "paths.txt"
    paths.write_text("/a\n", encoding="utf-8")
    rate, seconds = 200, 2
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.open_loop", "--url",
             f"http://127.0.0.1:{sock.getsockname()[1]}", "--paths", str(paths), "--rate",
             str(rate), "--seconds", str(seconds), "--connections", "1"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        server.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["answered"] == result["asked"] == rate * seconds
    # The 60 requests due during the 0.3 s stall were sent only after it, on the one
    # connection: counted from their due times, the slowest 1 % waited most of the stall.
    # Counted from their sends, each would have taken well under a millisecond.
    assert result["max_ms"] >= STALL_S * 1000
    assert result["p99_ms"] >= 0.8 * STALL_S * 1000, result
    assert result["p50_ms"] < STALL_S * 1000 / 3, result
