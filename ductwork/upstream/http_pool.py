"""GET requests over pooled HTTP/1.1 keep-alive connections: the transport of the upstream client.

A full sync is about a hundred thousand small GETs, so the transport's cost per request is most
of the sync's CPU. aiohttp's (cookies, header objects, a request and a response object, stream
readers, timers per request) cost about 2.5 times a bare connection's on this machine's
replayed medium sync (``bench/`` has the figures). Here a connection is one asyncio protocol
fed to httptools' response parser (the parser uvicorn uses): nothing is built per request but
the request's head and the answer's body.

What the client relies on: ``Content-Length``, chunked and read-until-close bodies; gzip and
deflate inflated a bounded piece at a time and refused past a cap (a few megabytes of gzip can
inflate to gigabytes); a head refused past ``MAX_HEAD_BYTES`` or ``MAX_HEADER_FIELDS``, trailer
fields counted with it (httptools builds a field's value by repeated concatenation, so one
endless value would take memory and time without end); a connection that fails or closes before
its answer ends raises ``ConnectionLost``; a kept-alive connection the server closed while it
sat idle is replaced once, at no retry's cost; an answer not whole by its deadline raises
``TimeoutError`` (one watchdog looks at every connection a few times per timeout, instead of a
timer armed and cancelled around each request, which cost a tenth of the event loop's time).
No redirects, no cookies, no proxies: the upstream service uses none.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import httptools

# Content codings inflated: gzip, and deflate (zlib-wrapped as the standard says, or raw, as
# some servers send it: told apart by its first byte).
_GZIP = frozenset({b"gzip", b"x-gzip"})
_INFLATED = _GZIP | {b"deflate"}
# The most an answer's head (status line and header fields) may hold, and the most fields
# (trailer fields included). The upstream's heads are a few hundred bytes in about a dozen
# fields; common servers refuse a request head past 8 to 16 KiB, so these leave ample room and
# no setting is needed.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100


class ConnectionLost(Exception):
    """The connection failed, or closed before the answer ended, or the answer was not HTTP."""


class BodyTooLarge(Exception):
    """The body passed the cap on bytes after decompression."""


class HeadTooLarge(Exception):
    """The head passed ``MAX_HEAD_BYTES`` or ``MAX_HEADER_FIELDS``; the message says which, as
    the end of a sentence ("the answer's head is longer than ...")."""


@dataclass(frozen=True)
class RawAnswer:
    """An answer as the pool received it: the status, the body (inflated) and ``Retry-After``."""

    status: int
    body: bytes
    retry_after: str | None = None


@dataclass(frozen=True)
class Origin:
    """Where a connection goes: scheme, host and port, and the ``Host`` header for it."""

    tls: bool
    host: str
    port: int
    netloc: str

    @classmethod
    def split(cls, url: str) -> tuple[Origin, str]:
        """The origin of an absolute http or https URL, and the rest of it (path and query, as
        written; "" when there is none)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.netloc}")
        tls = parts.scheme == "https"
        origin = cls(tls, parts.hostname, parts.port or (443 if tls else 80), parts.netloc)
        return origin, parts.path + (f"?{parts.query}" if parts.query else "")


def header_lines(headers: Mapping[str, str]) -> str:
    """``headers`` as the lines of a request head, made once by whoever sends them often."""
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items())


def request_target(path: str, query: Mapping[str, object] | None) -> str:
    """The target of ``GET path?query``: ``path`` already percent-encoded (it may carry a query
    of its own), the query encoded here (a space as ``+``, every reserved character escaped);
    "/" for an empty path."""
    if query:
        path = f"{path}{'&' if '?' in path else '?'}{urlencode(query)}"
    return path or "/"


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, max_body_bytes: int) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._cap = max_body_bytes
        self._transport: asyncio.Transport | None = None
        self._answer: asyncio.Future[RawAnswer] | None = None
        self.deadline = 0.0  # the event loop's time by which the current answer must be whole
        self.closed = False
        self.received_any = False  # whether the current request has had a byte of answer
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._chunks: list[bytes] = []
        self._size = 0
        self._retry_after: str | None = None
        self._coding: bytes | None = None
        self._inflater: zlib._Decompress | None = None
        self._wbits = 0
        self._delimited = False  # Content-Length or chunked: the body does not end at close
        self._headers_done = False
        self._keep_alive = False
        self._head_bytes = 0  # bytes of the head fed so far
        self._fields = 0  # header and trailer fields so far
        # Bytes after the head fed in reads that gave no body: chunk framing, or trailer fields
        # (which httptools keeps whole in memory like header fields).
        self._bodiless_bytes = 0
        self._gave_body = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        if self._answer is None or self._answer.done():
            # Bytes with no request waiting for them: the connection cannot be trusted.
            self._close()
            return
        try:
            rest = data if self._headers_done else self._feed_head(data)
            if rest:
                self._feed_after_head(rest)
        except httptools.HttpParserCallbackError as exc:
            # httptools leaves the callback's own exception (a body over the cap) as context.
            self._fail(exc.__context__ or exc)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionLost(f"an answer that is not HTTP/1.1 ({exc})"))
        except HeadTooLarge as exc:
            self._fail(exc)

    def _feed_head(self, data: bytes) -> memoryview:
        """Feed the parser ``data`` up to the cap on the head's bytes; returns what is left of
        it once the head has ended (empty when it has not). Raises ``HeadTooLarge`` at the
        first byte past the cap, so no field's value grows past it."""
        view = memoryview(data)
        while view and not self._headers_done:
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:
                raise HeadTooLarge(f"the answer's head is longer than {MAX_HEAD_BYTES:,} bytes")
            piece, view = view[:room], view[room:]
            self._head_bytes += len(piece)
            self._parser.feed_data(piece)  # may end the head and go on into the body
        return view

    def _feed_after_head(self, data: bytes | memoryview) -> None:
        """Feed the parser bytes of the body; reads that give no body at all are counted, and
        past ``MAX_HEAD_BYTES`` of them in a row (endless trailer fields or chunk framing) the
        answer is refused."""
        self._gave_body = False
        self._parser.feed_data(data)
        if self._gave_body:
            self._bodiless_bytes = 0
            return
        self._bodiless_bytes += len(data)
        if self._bodiless_bytes > MAX_HEAD_BYTES:
            raise HeadTooLarge(
                f"the answer's trailer fields are longer than {MAX_HEAD_BYTES:,} bytes"
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is None or self._answer.done():
            return
        if self._headers_done and not self._delimited and exc is None:
            self.on_message_complete()  # a body that ends with the connection
        else:
            reason = f"connection lost ({type(exc).__name__})" if exc else "connection closed"
            self._fail(ConnectionLost(f"{reason} before the answer ended"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > MAX_HEADER_FIELDS:
            raise HeadTooLarge(f"the answer has more than {MAX_HEADER_FIELDS} header fields")
        lowered = name.lower()
        if lowered == b"content-encoding":
            self._coding = value.strip().lower()
        elif lowered == b"retry-after":
            self._retry_after = value.decode("latin-1").strip()
        elif lowered in (b"content-length", b"transfer-encoding"):
            self._delimited = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()
        if self._coding in _GZIP:
            self._wbits = 16 + zlib.MAX_WBITS
            self._inflater = zlib.decompressobj(self._wbits)

    def on_body(self, body: bytes) -> None:
        self._gave_body = True
        if self._coding in _INFLATED:
            self._inflate(body)
        else:
            self._take(body)

    def on_message_complete(self) -> None:
        if self._inflater is not None:
            self._take(self._inflater.flush())
        answer = RawAnswer(self._status, b"".join(self._chunks), self._retry_after)
        if not self._keep_alive:
            self._close()
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)

    # the body

    def _inflate(self, data: bytes) -> None:
        if self._inflater is None:  # deflate
            self._wbits = zlib.MAX_WBITS if data[:1] == b"\x78" else -zlib.MAX_WBITS
            self._inflater = zlib.decompressobj(self._wbits)
        while data:
            if self._inflater.eof:
                # Another gzip member: RFC 1952 lets a body be several, joined when inflated.
                self._inflater = zlib.decompressobj(self._wbits)
            inflater = self._inflater
            # At most one byte past the cap per call: a small input can inflate to gigabytes.
            self._take(inflater.decompress(data, self._cap - self._size + 1))
            data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail

    def _take(self, data: bytes) -> None:
        if not data:
            return
        self._size += len(data)
        if self._size > self._cap:
            raise BodyTooLarge(self._size)
        self._chunks.append(data)

    # requests

    async def get(self, head: bytes, deadline: float) -> RawAnswer:
        """Send one request head and wait for its whole answer, due by ``deadline`` (the
        event loop's clock; the pool's watchdog enforces it)."""
        assert self._transport is not None
        self._reset()
        self.received_any = False
        self.deadline = deadline
        self._answer = asyncio.get_running_loop().create_future()
        self._transport.write(head)
        try:
            return await self._answer
        finally:
            self._answer = None

    @property
    def overdue_at(self) -> float | None:
        """The deadline of the answer awaited, or None when none is."""
        return self.deadline if self._answer is not None and not self._answer.done() else None

    def time_out(self, timeout_s: float) -> None:
        """Give up the awaited answer: it was not whole within ``timeout_s``."""
        self._fail(TimeoutError(f"no whole answer within {timeout_s:g} s"))

    @property
    def reusable(self) -> bool:
        """Whether another request may be sent on this connection."""
        return not self.closed and self._keep_alive

    def _fail(self, exc: BaseException) -> None:
        self._close()
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc)

    def _close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once (a request given up, or the pool closed)."""
        self.closed = True
        if self._transport is not None:
            self._transport.abort()


class ConnectionPool:
    """Keep-alive connections to any number of origins, each carrying one request at a time.

    It opens a connection whenever none is idle: the caller bounds requests in flight, and so
    the connections open. ``headers`` go with every request. A request has ``timeout_s`` from
    its start to its answer's end, connecting included; its ``TimeoutError`` comes at most a
    quarter of that (or a second) late.
    """

    def __init__(self, headers: Mapping[str, str], max_body_bytes: int, timeout_s: float) -> None:
        self._headers = header_lines(headers)
        self._max_body_bytes = max_body_bytes
        self._tls: ssl.SSLContext | None = None  # made at the first https connection
        self._timeout_s = timeout_s
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._watchdog: asyncio.TimerHandle | None = None

    async def get(self, origin: Origin, target: str, extra_lines: str = "") -> RawAnswer:
        """``GET target`` at ``origin``, with ``extra_lines`` (``header_lines``) beside the
        pool's headers; raises ``ConnectionLost``, ``BodyTooLarge``, ``HeadTooLarge``,
        ``TimeoutError`` or an ``OSError`` (the connection refused or reset)."""
        head = (
            f"GET {target} HTTP/1.1\r\nHost: {origin.netloc}\r\n{self._headers}{extra_lines}\r\n"
        ).encode("latin-1")
        loop = asyncio.get_running_loop()
        if self._watchdog is None:
            self._watch()
        deadline = loop.time() + self._timeout_s
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.closed:  # closed by the server while idle
                self._open.discard(connection)
                continue
            try:
                return await self._exchange(origin, connection, head, deadline)
            except ConnectionLost:
                # The server closed a connection that sat idle (its keep-alive timeout) just as
                # it was reused: no byte of answer came, so the request was not handled there.
                if connection.received_any:
                    raise
        connecting = self._connect(origin)
        connection = await asyncio.wait_for(connecting, max(0.0, deadline - loop.time()))
        return await self._exchange(origin, connection, head, deadline)

    async def _exchange(
        self, origin: Origin, connection: _Connection, head: bytes, deadline: float
    ) -> RawAnswer:
        try:
            answer = await connection.get(head, deadline)
        except BaseException:
            connection.abort()
            self._open.discard(connection)
            raise
        if connection.reusable:
            self._idle.setdefault(origin, []).append(connection)
        else:
            self._open.discard(connection)
        return answer

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        if origin.tls and self._tls is None:
            self._tls = ssl.create_default_context()  # reads the system's CA certificates
        _, connection = await loop.create_connection(
            lambda: _Connection(self._max_body_bytes),
            origin.host,
            origin.port,
            ssl=self._tls if origin.tls else None,
        )
        self._open.add(connection)
        return connection

    def _watch(self) -> None:
        """Time out every answer past its deadline, then look again a little later."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        for connection in list(self._open):
            due = connection.overdue_at
            if due is not None and due <= now:
                connection.time_out(self._timeout_s)
        interval = min(1.0, self._timeout_s / 4)
        self._watchdog = loop.call_at(now + interval, self._watch)

    def close(self) -> None:
        """Close every connection."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for connection in self._open:
            connection.abort()
        self._open.clear()
        self._idle.clear()
