"""Bounds on a request's head (its request line and headers), for ``ductwork serve``.

uvicorn's httptools protocol gathers a request line and its headers without any limit
(httptools and llhttp enforce none), and waits for a connection's first request for as long as
the client likes: its keep-alive timeout starts only after an answer, and any byte cancels it.
So one client could make a worker hold gigabytes, or hold connections open by sending nothing
or a byte now and then. This protocol is uvicorn's with two bounds added:

- a head over ``HEAD_LIMIT_BYTES`` is refused: 414 while the request line is still arriving,
  431 once the headers are, in the path family's error style (a Problem outside the families);
  the connection is then closed. While an earlier request of the same connection is still
  being answered there is no room for an answer, and the connection is only closed;
- a connection must complete each request's head within ``DUCTWORK_SERVE_HEAD_TIMEOUT_S`` of
  opening, or of its previous answer; otherwise it is closed.

Bytes are handed to the parser at most ``HEAD_LIMIT_BYTES`` at a time, and counted while a
head is open, so a worker never holds more than the limit of any head. The one inexactness:
with HTTP pipelining, the start of a head that arrives in the same read as the end of the
previous request is not counted, so such a head is refused only past twice the limit.

After a refusal the connection is closed the way a careful server closes it: the answer is
sent, the sending side shut, and what the client still sends is read and dropped for at most
``LINGER_S``. Closing at once with unread bytes would make the kernel reset the connection,
and the client might never read why it was refused.

Each request's answer also goes out in one write, its head with its body
(``serve/one_write.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ductwork.contract.errors import ApiError, ErrorCode, render
from ductwork.contract.paths import family_of
from ductwork.settings import ServeSettings, load
from serve.one_write import hold_head

HEAD_LIMIT_BYTES = 16 * 1024
LINGER_S = 2.0
NOSNIFF = b"x-content-type-options: nosniff\r\n"


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a size limit and a time limit on each request head."""

    # Read from the settings once per worker process, as the first connection opens.
    head_timeout_s: ClassVar[float | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if BoundedHttpToolsProtocol.head_timeout_s is None:
            BoundedHttpToolsProtocol.head_timeout_s = load(ServeSettings).serve_head_timeout_s
        self._head_timer: asyncio.TimerHandle | None = None
        # When the head being read must be complete (loop time); None while none is read.
        self._head_deadline: float | None = None
        self._refused = False
        self._begin_head()

    def _begin_head(self) -> None:
        """The next bytes start a new request head."""
        self._reading_head = True
        self._head_bytes = 0
        self._line_done = False

    # Connection events
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the refusal is sent: what still comes is dropped until the close
        while data:
            if self._reading_head:
                room = HEAD_LIMIT_BYTES - self._head_bytes
                if room <= 0:
                    self._refuse()
                    return
                piece = data if len(data) <= room else data[:room]
                self._head_bytes += len(piece)
                if not self._line_done and b"\n" in piece:
                    self._line_done = True
            else:  # a body, and maybe the next request: fed in bounded pieces too
                piece = data if len(data) <= HEAD_LIMIT_BYTES else data[:HEAD_LIMIT_BYTES]
            data = data[len(piece) :]
            super().data_received(piece)
            if (
                self.parser is None
                or self.transport.is_closing()
                or self.transport.get_protocol() is not self  # upgraded to a WebSocket
            ):
                return

    # Parser callbacks
    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._head_deadline = None  # the timer, if pending, finds no head to time out
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not before:
            hold_head(self.cycle, self.transport)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._begin_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    # Timing out a head. One timer per connection, not one armed and one cancelled per request:
    # an answer only moves the deadline, and a timer that fires before the deadline it finds
    # waits on for that one (at most once per timeout on a busy connection).
    def _arm_head_timer(self) -> None:
        timeout = BoundedHttpToolsProtocol.head_timeout_s
        assert timeout is not None
        deadline = self._head_deadline = self.loop.time() + timeout
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(deadline, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        self._head_deadline = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        deadline = self._head_deadline
        if deadline is None:  # no head is being read: the next answer arms the timer again
            return
        if self.loop.time() < deadline:  # a later head began: its own deadline counts
            self._head_timer = self.loop.call_at(deadline, self._head_timed_out)
            return
        answering = self.cycle is not None and not self.cycle.response_complete
        # A request being answered re-arms the timer when its answer is complete.
        if self._reading_head and not answering and not self.transport.is_closing():
            self.transport.close()

    # Refusing
    def _refuse(self) -> None:
        """Answer 414 or 431 (unless an earlier answer is under way) and close."""
        self._refused = True
        self._cancel_head_timer()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()
            return
        if self._line_done:
            error = ApiError(ErrorCode.HEADERS_TOO_LARGE, "The request's headers are too large")
        else:
            error = ApiError(ErrorCode.URI_TOO_LONG, "The request line is too long")
        path = bytes(getattr(self, "url", b"")).split(b"?", 1)[0].decode("latin-1")
        self._answer_and_close(error, path)

    def _answer_and_close(self, error: ApiError, path: str) -> None:
        answer = render(error, family_of(path), path[:200])
        head = [STATUS_LINE[answer.status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: ", answer.media_type.encode(), b"\r\n",
            b"content-length: ", str(len(answer.body)).encode(), b"\r\n",
            NOSNIFF, b"connection: close\r\n\r\n", answer.body,
        ]  # fmt: skip
        self.transport.write(b"".join(head))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.flow.resume_reading()  # read on, so the client's last bytes do not reset the close
        self.loop.call_later(LINGER_S, self.transport.close)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse, with ``nosniff`` as on every other."""
        body = msg.encode("ascii")
        head = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: ", str(len(body)).encode(), b"\r\n",
            NOSNIFF, b"connection: close\r\n\r\n", body,
        ]  # fmt: skip
        self.transport.write(b"".join(head))
        self.transport.close()
