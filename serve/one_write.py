"""An answer's head and body sent in one write.

uvicorn writes a response's status line and headers to the socket as soon as the app starts
the response, and its body when the app sends it: two system calls for every answer, where
most answers of the read API are a few hundred bytes sent at once. ``hold_head`` gives a
request's cycle a view of the connection that holds the head until the first write of the body
(or the end of the response, for an answer with none) and sends both together. Anything else
(a ``100 Continue``, a close) goes through at once, the held head first.

An answer that is whole before it is sent (the short path's: ``serve/fast_answers.py``) can
skip uvicorn's ``send`` altogether: ``hold_head`` puts ``WHOLE_ANSWER`` among the request's
ASGI scope extensions, a callable that writes the status line, uvicorn's default headers, the
answer's headers and its body in one write and completes the cycle as ``send`` would.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

# Above this size a body is written beside the head (one vectored write) rather than copied
# behind it.
COPY_LIMIT_BYTES = 16 * 1024
# In a request's ASGI scope extensions: ``(status, headers, body) -> bool``, which sends a whole
# answer at once, or returns False (nothing sent) when the request's ``send`` must send it.
WHOLE_ANSWER = "ductwork.whole_answer"
# What uvicorn refuses in a header value, but for the line breaks (counted instead).
_UNSAFE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BODILESS = (204, 304)


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
    extensions = cycle.scope.setdefault("extensions", {})

    def on_response() -> None:
        # The whole-answer callable holds the cycle that holds it: let go of it once the
        # answer is complete, so that refcounting frees the cycle. Left to the cyclic garbage
        # collector, every request's cycle made its young-generation passes milliseconds
        # long, a stall of every request waiting on the worker.
        extensions.pop(WHOLE_ANSWER, None)
        held.flush()
        done()

    cycle.on_response = on_response
    extensions[WHOLE_ANSWER] = partial(send_whole, cycle, transport)


def send_whole(
    cycle: Any,
    transport: asyncio.Transport,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> bool:
    """Send a GET's whole answer on ``cycle``'s connection in one write and complete the cycle,
    as uvicorn's ``send`` would with a start and a body message. False, with nothing sent, when
    that ``send`` must do it: a response already started, a connection whose writes are paused,
    or headers it would refuse or answer in chunks (lower-case names are the caller's duty)."""
    if cycle.response_started or cycle.disconnected or cycle.flow.write_paused:
        return False
    lines = [STATUS_LINE[status]]
    length = None
    for name, value in cycle.default_headers:
        lines += (name, b": ", value, b"\r\n")
    for name, value in headers:
        if name == b"content-length":
            length = value
        lines += (name, b": ", value, b"\r\n")
    breaks = 2 + len(cycle.default_headers) + len(headers)  # the status line's, the last's
    if not cycle.keep_alive:
        lines.append(b"connection: close\r\n")
        breaks += 1
    lines.append(b"\r\n")
    head = b"".join(lines)
    if length is None:  # uvicorn would send a body without a length in chunks
        if body or status not in _BODILESS:
            return False
    elif int(length) != len(body):
        return False
    if (
        _UNSAFE.search(head) is not None
        or head.count(b"\r") != breaks
        or head.count(b"\n") != breaks
    ):
        return False  # a value uvicorn refuses: one with a control character or a line break
    cycle.response_started = cycle.response_complete = True
    cycle.waiting_for_100_continue = False
    if len(body) <= COPY_LIMIT_BYTES:
        transport.write(head + body)
    else:
        transport.writelines((head, body))
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()
    return True
