"""Subscribers for the notification tests: a real HTTP server on loopback that verifies every
delivery with the ``standardwebhooks`` package, as a subscriber's own code would, and a port
that accepts connections but never answers."""

from __future__ import annotations

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
