"""An answer's head and body sent in one write.

uvicorn writes a response's status line and headers to the socket as soon as the app starts
the response, and its body when the app sends it: two system calls for every answer, where
most answers of the read API are a few hundred bytes sent at once. ``hold_head`` gives a
request's cycle a view of the connection that holds the head until the first write of the body
(or the end of the response, for an answer with none) and sends both together. Anything else
(a ``100 Continue``, a close) goes through at once, the held head first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

# Above this size a body is written beside the head (one vectored write) rather than copied
# behind it.
COPY_LIMIT_BYTES = 16 * 1024


class HeadHoldingTransport:
    """One request's view of its connection's transport: the response head is held back
    until the next write."""

    __slots__ = ("_head", "_held_one", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._held_one = False

    def write(self, data: bytes) -> None:
        """Send ``data``; the first response head is kept until the write after it."""
        head = self._head
        if head is not None:
            self._head = None
            if len(data) <= COPY_LIMIT_BYTES:
                self._transport.write(head + data)
            else:
                self._transport.writelines((head, data))
            return
        # Only the first head of the cycle: an interim "100 Continue" must go out at once, and
        # body bytes can look like anything.
        if not self._held_one and data.startswith(b"HTTP/") and data[9:10] != b"1":
            self._head, self._held_one = data, True
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Send a head still held (an answer without a body, or one ending early)."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)

    def close(self) -> None:
        """Send what is held, then close the connection."""
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def hold_head(cycle: Any, transport: asyncio.Transport) -> None:
    """Give uvicorn's request ``cycle`` a transport that sends its head with its body, and
    flushes a head still held when the response is complete."""
    held = HeadHoldingTransport(transport)
    cycle.transport = held
    done: Callable[[], None] = cycle.on_response

    def on_response() -> None:
        held.flush()
        done()

    cycle.on_response = on_response
