"""Run an ASGI app with uvicorn on a free loopback port in a background thread.

For tests, benchmarks and the sandbox's in-process mode: the caller gets a real HTTP server
(real sockets, real keep-alive), bound to 127.0.0.1 only, stopped on exit.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

HOST = "127.0.0.1"


def free_socket(host: str = HOST) -> socket.socket:
    """A listening-ready TCP socket bound to a free port chosen by the kernel."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


@contextmanager
def serving(
    app: Any,
    *,
    sock: socket.socket | None = None,
    startup_timeout_s: float = 60.0,
    **config: Any,
) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL (``http://127.0.0.1:PORT``).

    Pass ``sock`` (from ``free_socket``) when the app must know its URL before it starts.
    """
    sock = sock or free_socket()
    port = sock.getsockname()[1]
    options = {"log_level": "warning", "loop": "uvloop", "http": "httptools", **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on {HOST}:{port}")
        time.sleep(0.01)
    try:
        yield f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
