"""The replay upstream: the sandbox's answers to a full sync, recorded once, written back from
memory at the cost of a dictionary lookup.

The sandbox builds each answer when asked (ASGI under uvicorn, a JSON envelope per page), about
a hundred microseconds a request: against a client that fetches as fast as a sync could, it
would use as much of the machine as the client. The replay answers the same requests with the
same bytes from a minimal ``asyncio.Protocol``: HTTP/1.1 keep-alive, requests pipelined or split
across reads, GET only, each answer's bytes prepared when the recording is loaded
(``sandbox.recorded_answers``). The recording itself is made by ``bench.fetch_floor --record``,
which walks every request a full sync makes.

A request without a recorded answer is a miss: a 404 with a JSON body, counted. Besides the
recorded answers it serves ``/healthz`` (200) and ``/_replay/stats``: ``{"requests": N,
"misses": M, "missed": [the first 20 targets missed], "answers": recorded}``.

    python -m bench.fetch_floor --url SANDBOX_URL --api-key KEY --record FILE
    python -m sandbox.replay --recording FILE --port PORT
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from sandbox.recorded_answers import json_answer, read_recording, target_key

STATS_PATH = b"/_replay/stats"
HEALTH_PATH = b"/healthz"
MISSES_LISTED = 20
# A request head longer than this without its blank line ends the connection (431).
MAX_HEAD_BYTES = 64 * 1024
HEALTHY = json_answer(200, "OK", b'{"status":"ok"}')
BAD_REQUEST = json_answer(400, "Bad Request", b'{"error":"malformed request"}')
HEAD_TOO_LARGE = json_answer(
    431, "Request Header Fields Too Large", b'{"error":"request head too large"}'
)
CHUNKED_REQUEST = json_answer(501, "Not Implemented", b'{"error":"chunked request bodies"}')
ONLY_GET = json_answer(405, "Method Not Allowed", b'{"error":"the replay answers GET only"}')


class Replay:
    """The recorded answers and the counts of what was asked of them."""

    def __init__(self, answers: dict[bytes, bytes]) -> None:
        # Keyed by canonical target; targets as clients spelled them are added on first use,
        # so a repeated spelling is one lookup.
        self.answers = dict(answers)
        self.recorded = len(answers)
        self.requests = 0
        self.misses = 0
        self.missed: list[str] = []

    def stats(self) -> bytes:
        """The ``/_replay/stats`` answer."""
        body = {
            "requests": self.requests,
            "misses": self.misses,
            "missed": self.missed,
            "answers": self.recorded,
        }
        return json_answer(200, "OK", json.dumps(body).encode())

    def answer(self, method: bytes, target: bytes) -> bytes:
        """The response bytes to one request."""
        if method == b"GET" and target == HEALTH_PATH:
            return HEALTHY
        if method == b"GET" and target == STATS_PATH:
            return self.stats()
        self.requests += 1
        if method != b"GET":
            return self.miss(method, target)
        found = self.answers.get(target)
        if found is None:
            found = self.answers.get(target_key(target.decode("latin-1")).encode("ascii"))
            if found is None:
                return self.miss(method, target)
            self.answers[target] = found
        return found

    def miss(self, method: bytes, target: bytes) -> bytes:
        """Count a request the recording has no answer for; its 404 (405 for another method)."""
        self.misses += 1
        shown = target.decode("latin-1")
        if len(self.missed) < MISSES_LISTED:
            self.missed.append(shown if method == b"GET" else f"{method.decode('latin-1')} {shown}")
        if method != b"GET":
            return ONLY_GET
        body = json.dumps({"error": "no recorded answer", "target": shown}).encode()
        return json_answer(404, "Not Found", body)


class RequestHead:
    """What the replay reads of a request head: the request line, whether the connection
    stays open after the answer, and the length of a body to skip."""

    __slots__ = ("body_length", "chunked", "keep_alive", "method", "target")

    def __init__(self, head: bytes) -> None:
        line_end = head.find(b"\r\n")
        line = head if line_end < 0 else head[:line_end]
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise ValueError("malformed request line")
        self.method, self.target, version = parts
        fields = b"" if line_end < 0 else head[line_end:].lower()
        connection = _field(fields, b"connection")
        tokens = {token.strip() for token in connection.split(b",")}
        if version == b"HTTP/1.0":
            self.keep_alive = b"keep-alive" in tokens
        else:
            self.keep_alive = b"close" not in tokens
        length = _field(fields, b"content-length")
        self.body_length = int(length) if length else 0
        if self.body_length < 0:
            raise ValueError("negative content-length")
        self.chunked = b"chunked" in _field(fields, b"transfer-encoding")


def _field(fields: bytes, name: bytes) -> bytes:
    """The value of header ``name`` in lower-cased header lines (each after a CRLF), or b""."""
    start = fields.find(b"\r\n" + name + b":")
    if start < 0:
        return b""
    start += len(name) + 3
    end = fields.find(b"\r\n", start)
    return fields[start : None if end < 0 else end].strip()


class ReplayProtocol(asyncio.Protocol):
    """One client connection: reads request heads as they arrive, in whatever pieces, and
    writes the answers to all complete ones together."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.transport: asyncio.Transport | None = None
        self.pending = b""  # the start of a request head not yet complete
        self.body_left = 0  # bytes of a request body still to skip

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.body_left:
            skipped = min(self.body_left, len(data))
            self.body_left -= skipped
            data = data[skipped:]
        buffer = self.pending + data if self.pending else data
        answers: list[bytes] = []
        at = 0
        closing = False
        while (end := buffer.find(b"\r\n\r\n", at)) >= 0:
            # Blank lines before a request line are allowed (RFC 9112, 2.2).
            head = buffer[at:end].lstrip(b"\r\n")
            at = end + 4
            try:
                request = RequestHead(head)
            except ValueError:
                answers.append(BAD_REQUEST)
                closing = True
                break
            if request.chunked:
                answers.append(CHUNKED_REQUEST)
                closing = True
                break
            answers.append(self.replay.answer(request.method, request.target))
            if not request.keep_alive:
                closing = True
                break
            if request.body_length:
                skipped = min(request.body_length, len(buffer) - at)
                at += skipped
                self.body_left = request.body_length - skipped
        self.pending = b"" if closing else buffer[at:]
        if len(self.pending) > MAX_HEAD_BYTES:
            answers.append(HEAD_TOO_LARGE)
            closing = True
        if answers:
            transport.write(answers[0] if len(answers) == 1 else b"".join(answers))
        if closing:
            transport.close()  # after the buffered answers are written

    def pause_writing(self) -> None:
        # A client that sends without reading: stop reading it until its answers drain.
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    if importlib.util.find_spec("uvloop") is None:
        return None
    import uvloop

    return uvloop.new_event_loop


async def serve(replay: Replay, host: str, port: int, announce: str) -> None:
    """Serve ``replay`` on ``host:port`` until SIGTERM; print ``announce`` (with ``{url}``
    filled in) once connections are accepted."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: ReplayProtocol(replay), host, port, reuse_address=True, backlog=1024
    )
    bound = server.sockets[0].getsockname()[1]
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    async with server:
        print(announce.format(url=f"http://{host}:{bound}"), flush=True)
        await stopped.wait()


def main(argv: list[str] | None = None) -> int:
    """``python -m sandbox.replay --recording FILE --port PORT``."""
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.replay", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--recording", type=Path, required=True, help="from fetch_floor --record")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    options = parser.parse_args(argv)
    started = time.perf_counter()
    replay = Replay(read_recording(options.recording))
    took = time.perf_counter() - started
    announce = f"replay: {replay.recorded} answers loaded in {took:.1f}s, serving on {{url}}"
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(serve(replay, options.host, options.port, announce))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
