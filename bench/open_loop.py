"""An open-loop load generator: requests sent at fixed times, latency from the scheduled time.

Request ``i`` is due at ``start + i / rate`` whatever happened to the ones before it. Its
latency runs from that due time to the end of its answer, so time spent waiting for a free
connection (or for a slow server to drain its queue) counts: the coordinated-omission
correction that a closed-loop tool such as plain ``wrk`` leaves out. Connections are the
keep-alive ones of ``bench.raw_http`` (``--connections`` of them); a request due while all are
busy waits for one, and that wait is part of its latency.

The paths file has one request a line: a path, then optionally a tab and extra header lines
separated by ``\\n`` escapes (``Accept-Encoding: gzip``, ``If-None-Match: "..."``).

Prints one JSON line: requests asked and answered, the rate achieved, p50/p99/max latency in ms,
the count of each status, and the generator's own wall and CPU seconds.

    python -m bench.open_loop --url URL --paths FILE --rate 5000 --seconds 4 [--key KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The shortest wait between two sends: uvloop's timers count whole milliseconds.
TICK_S = 0.001


def read_requests(paths_file: Path, host: str, key: str | None) -> list[bytes]:
    """Every line of ``paths_file`` as a request head."""
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    heads = []
    for line in paths_file.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        path, _, extra = line.partition("\t")
        lines = "".join(f"{header}\r\n" for header in extra.split("\\n") if header)
        heads.append(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}{lines}\r\n".encode())
    return heads


def percentile(sorted_values: list[float], share: float) -> float:
    """The value below which ``share`` of the values lie (nearest rank)."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(share * len(sorted_values)))]


class _Schedule:
    """``total`` requests, request *i* due at ``start + i / rate``, cycling through ``heads``;
    none is due before ``begin``."""

    def __init__(self, heads: list[bytes], rate: float, total: int) -> None:
        self.heads, self.rate, self.total = heads, rate, total
        self.start = math.inf
        self.sent = 0

    def begin(self, at: float) -> None:
        """Make the first request due at ``at``."""
        self.start = at

    def next_due(self) -> float | None:
        """When the next request is due; None once all are sent."""
        return self.start + self.sent / self.rate if self.sent < self.total else None


class _Load:
    """The shared state: requests due but waiting for a connection, idle connections, and
    what was measured."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, host: str, port: int, schedule: _Schedule
    ) -> None:
        self.loop = loop
        self.host, self.port = host, port
        self.schedule = schedule
        self.opened: list[_Connection] = []
        self.reopening: set[asyncio.Task[None]] = set()
        self.waiting: deque[tuple[bytes, float]] = deque()
        # First in, first out: every connection takes its turn, so none sits idle long enough
        # for the server's keep-alive timeout to close it under a light load.
        self.idle: deque[_Connection] = deque()
        self.latencies: list[float] = []
        self.statuses: Counter[int] = Counter()
        self.failures = 0

    def send_due(self) -> None:
        """Send every request due by now, each on an idle connection or queued for one.

        Called at each timer tick and after each answer: under load, answers arrive far more
        often than the timer fires, so most requests leave within a fraction of a millisecond
        of their due time."""
        schedule = self.schedule
        now = time.perf_counter()
        while (due := schedule.next_due()) is not None and due <= now:
            head = schedule.heads[schedule.sent % len(schedule.heads)]
            schedule.sent += 1
            if self.idle:
                self.idle.popleft().send(head, due)
            else:
                self.waiting.append((head, due))

    def done(self, connection: _Connection, status: int, due: float) -> None:
        self.latencies.append(time.perf_counter() - due)
        self.statuses[status] += 1
        self._put_to_work(connection)
        self.send_due()

    def _put_to_work(self, connection: _Connection) -> None:
        """Give a free connection the oldest waiting request, or make it idle."""
        if self.waiting:
            connection.send(*self.waiting.popleft())
        else:
            self.idle.append(connection)

    async def open(self) -> None:
        """One more keep-alive connection, put to work on a waiting request or made idle."""
        _, connection = await self.loop.create_connection(
            lambda: _Connection(self), self.host, self.port
        )
        self.opened.append(connection)
        self._put_to_work(connection)

    def lost(self, connection: _Connection, in_flight: bool) -> None:
        """A connection the server closed (its keep-alive timeout, say): its request, if any,
        failed; a new connection takes its place."""
        if connection in self.idle:
            self.idle.remove(connection)
        if in_flight:
            self.failures += 1
        task = self.loop.create_task(self.open())
        self.reopening.add(task)
        task.add_done_callback(self.reopening.discard)

    def close(self) -> None:
        """Close every connection, as the run ends (not counted as lost)."""
        for task in self.reopening:
            task.cancel()
        for connection in self.opened:
            if connection.transport is not None:
                transport, connection.transport = connection.transport, None
                transport.close()


class _Connection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight; parses the status line
    and ``Content-Length`` only (the read API and the ceiling always send it, or no body)."""

    def __init__(self, load: _Load) -> None:
        self.load = load
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.due = 0.0
        self.in_flight = False
        self.need = -1  # bytes of the whole answer, once its head is in

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, head: bytes, due: float) -> None:
        self.due = due
        self.in_flight = True
        assert self.transport is not None
        self.transport.write(head)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if self.need < 0:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buffer[:end].lower()
                at = head.find(b"\r\ncontent-length:")
                length = 0
                if at >= 0:
                    stop = head.find(b"\r\n", at + 2)
                    length = int(head[at + 17 : stop if stop >= 0 else None])
                self.need = end + 4 + length
                self.status = int(self.buffer[9:12])
            if len(self.buffer) < self.need:
                return
            self.buffer = self.buffer[self.need :]
            self.need = -1
            self.in_flight = False
            self.load.done(self, self.status, self.due)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:  # closed by the server, not by the end of the run
            self.transport = None
            self.load.lost(self, self.in_flight)


async def run(url: str, paths_file: Path, key: str | None, rate: float, seconds: float,
              connections: int) -> dict[str, Any]:  # fmt: skip
    """Send ``rate`` requests a second for ``seconds``; the latencies from the due times."""
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    heads = read_requests(paths_file, parts.netloc, key)
    total = int(rate * seconds)
    schedule = _Schedule(heads, rate, total)
    load = _Load(loop, parts.hostname or "127.0.0.1", parts.port or 80, schedule)
    for _ in range(connections):
        await load.open()
    start = time.perf_counter() + 0.05
    schedule.begin(start)
    while (due := schedule.next_due()) is not None:
        # Until the next request is due, and never less than the timer's resolution: uvloop
        # rounds a shorter delay down to zero, and the generator would then spin on a core
        # the server it measures needs. Answers also send what is due (``send_due``); a
        # request sent late still counts from its due time.
        await asyncio.sleep(max(TICK_S, due - time.perf_counter()))
        load.send_due()
    deadline = loop.time() + 30
    while len(load.latencies) + load.failures < total and loop.time() < deadline:
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - start
    load.close()
    latencies = sorted(load.latencies)
    return {
        "asked": total,
        "answered": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1000,
        "unanswered": total - len(latencies),
        "statuses": {str(k): v for k, v in sorted(load.statuses.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--paths", type=Path, required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=32)
    options = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # the plain loop only sends fewer requests a second
        pass
    started = time.perf_counter()
    result = asyncio.run(
        run(
            options.url,
            options.paths,
            options.key,
            options.rate,
            options.seconds,
            options.connections,
        )
    )
    result["wall_s"] = time.perf_counter() - started
    # The generator's own CPU time, start-up included: what it takes from the server's cores.
    result["cpu_s"] = time.process_time()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
