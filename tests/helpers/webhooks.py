"""Subscribers for the notification tests: a real HTTP server on loopback that verifies every
delivery with the ``standardwebhooks`` package, as a subscriber's own code would, a port that
accepts connections but never answers, and a server that trickles its answer's headers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from sandbox.local_server import free_socket


@dataclass(frozen=True)
class Delivery:
    """One POST as received: its webhook id, parsed body, whether its signature verified
    (against the secret known at that time) and the status it was answered with."""

    message_id: str
    body: dict
    verified: bool
    status: int


@dataclass
class Subscriber:
    """What the server knows: the secret to verify with (set once the CLI printed it), the
    status to answer with, and every delivery received, in arrival order."""

    url: str
    secret: str | None = None
    status: int = 204
    received: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acknowledged(self) -> list[Delivery]:
        """The deliveries answered with a 2xx, in order."""
        with self.lock:
            return [d for d in self.received if 200 <= d.status < 300]

    def wait_for(self, count: int, limit_s: float) -> list[Delivery]:
        """Poll until ``count`` deliveries were acknowledged (bounded by ``limit_s``)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if len(found := self.acknowledged()) >= count:
                return found
            time.sleep(0.2)  # polling for the daemon's next delivery, not timing it
        raise AssertionError(f"{count} deliveries expected, got {self.received}")


def _handler(subscriber: Subscriber) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            verified = False
            if subscriber.secret is not None:
                try:
                    Webhook(subscriber.secret).verify(raw, headers)
                    verified = True
                except WebhookVerificationError:
                    verified = False
            with subscriber.lock:
                status = subscriber.status
                subscriber.received.append(
                    Delivery(headers.get("webhook-id", ""), json.loads(raw), verified, status)
                )
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def subscriber_server() -> Iterator[Subscriber]:
    """A subscriber on a free loopback port, answering ``status`` (204 at first)."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    subscriber = Subscriber(f"http://127.0.0.1:{port}/hooks/ductwork")
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(subscriber))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield subscriber
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_subscriber() -> Iterator[str]:
    """A URL whose port accepts connections (the kernel completes them) but never answers."""
    sock: socket.socket = free_socket()
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hooks"
    finally:
        sock.close()


@dataclass
class Trickler:
    """A subscriber that answers ``HTTP/1.1 200 OK`` and then one header byte at a time, never
    ending its headers (each byte keeps a per-read timeout alive), until it is set to
    ``answer`` properly (204). It counts the connections the client closed on it, and keeps the
    ``webhook-id`` of every delivery it answered."""

    url: str
    byte_every_s: float
    answer: bool = False
    closed_by_client: int = 0
    answered: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def serve(self, conn: socket.socket) -> None:
        """Answer the requests of one connection, or trickle until the client closes it."""
        with conn:
            conn.settimeout(30)
            pending = b""
            while True:
                try:
                    request, pending = _read_request(conn, pending)
                except OSError:  # closed, or idle for long: the test is over
                    return
                if request is None:
                    return
                if self.answer:
                    with self.lock:
                        self.answered.append(request.get("webhook-id", ""))
                    conn.sendall(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                    continue
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX:")
                    # The subscriber's own pace, not a test's synchronisation.
                    while not self.stopping.wait(self.byte_every_s):
                        conn.sendall(b"x")
                except OSError:  # the client closed its end
                    with self.lock:
                        self.closed_by_client += 1
                return

    def wait_until_closed(self, count: int, limit_s: float) -> None:
        """Until the client has closed ``count`` connections (bounded by ``limit_s``); a closed
        connection is seen at the next byte sent."""
        deadline = time.monotonic() + limit_s
        while True:
            with self.lock:
                if self.closed_by_client >= count:
                    return
            assert time.monotonic() < deadline, f"{self.closed_by_client} of {count} closed"
            time.sleep(0.05)  # polling the server's count, not timing it

    def wait_for(self, count: int, limit_s: float) -> list[str]:
        """Poll until ``count`` deliveries were answered (bounded by ``limit_s``)."""
        deadline = time.monotonic() + limit_s
        while True:
            with self.lock:
                if len(self.answered) >= count:
                    return list(self.answered)
            assert time.monotonic() < deadline, f"{count} deliveries expected: {self.answered}"
            time.sleep(0.2)  # polling for the daemon's next delivery, not timing it


def _read_request(conn: socket.socket, pending: bytes) -> tuple[dict[str, str] | None, bytes]:
    """One request's headers (lower-case names) off ``conn``, its body skipped; None when the
    client closed. Returns what was read beyond it too."""
    while b"\r\n\r\n" not in pending:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        pending += chunk
    head, _, rest = pending.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        rest += chunk
    return headers, rest[length:]


@contextmanager
def trickling_subscriber(byte_every_s: float = 0.5) -> Iterator[Trickler]:
    """A :class:`Trickler` on a free loopback port, a thread per connection."""
    sock: socket.socket = free_socket()
    sock.listen(64)
    trickler = Trickler(f"http://127.0.0.1:{sock.getsockname()[1]}/hooks", byte_every_s)

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # the listening socket closed: the test is over
                return
            threading.Thread(target=trickler.serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield trickler
    finally:
        trickler.stopping.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the thread waiting in accept()
        sock.close()
