"""A minimal HTTP/1.1 client on asyncio streams: the physical floor of fetching over loopback.

Keep-alive connections, one request in flight on each, and only what is needed to find the
end of an answer: the status line, then ``Content-Length`` or a chunked body. No header
objects, no cookies, no redirects, no decompression. Used by the raw fetch floor and by the
open-loop load generator of the serving part.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from ductwork.upstream.http_pool import request_target


class RawConnection:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        """Connect to ``host:port``."""
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        return cls(reader, writer)

    async def request(self, head: bytes) -> tuple[int, bytes, bytes]:
        """Send a request head (``GET ... \\r\\n\\r\\n``); the status, raw headers and body."""
        self.writer.write(head)
        reader = self.reader
        headers = await reader.readuntil(b"\r\n\r\n")
        status = int(headers[9:12])
        lowered = headers.lower()
        at = lowered.find(b"\r\ncontent-length:")
        if at >= 0:
            end = lowered.index(b"\r\n", at + 2)
            length = int(lowered[at + 17 : end])
            body = await reader.readexactly(length) if length else b""
        elif b"\r\ntransfer-encoding: chunked" in lowered:
            body = await self._chunked()
        elif status in (204, 304):
            body = b""
        else:  # no length and not chunked: the body ends with the connection
            body = await reader.read()
        return status, headers, body

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # no trailers here
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    def close(self) -> None:
        """Close the socket."""
        self.writer.close()


class RawPool:
    """``size`` keep-alive connections to one origin; a request waits for a free one."""

    def __init__(self, url: str, size: int, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.size = size
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.suffix = f" HTTP/1.1\r\nHost: {parts.netloc}\r\n{extra}\r\n".encode()
        self.free: asyncio.Queue[RawConnection] = asyncio.Queue()
        self.opened: list[RawConnection] = []

    async def __aenter__(self) -> RawPool:
        for _ in range(self.size):
            connection = await RawConnection.open(self.host, self.port)
            self.opened.append(connection)
            self.free.put_nowait(connection)
        return self

    async def __aexit__(self, *_: object) -> None:
        for connection in self.opened:
            connection.close()

    def head(self, target: str, extra: bytes = b"") -> bytes:
        """The request head of ``GET target`` with the pool's headers and ``extra`` lines."""
        if extra:
            return b"GET " + target.encode() + self.suffix[:-2] + extra + b"\r\n"
        return b"GET " + target.encode() + self.suffix

    async def send(self, head: bytes) -> tuple[int, bytes, bytes]:
        """Send one request head on a free connection; its status, headers and body."""
        connection = await self.free.get()
        try:
            answer = await connection.request(head)
        except BaseException:
            connection.close()
            self.opened.remove(connection)
            replacement = await RawConnection.open(self.host, self.port)
            self.opened.append(replacement)
            self.free.put_nowait(replacement)
            raise
        self.free.put_nowait(connection)
        return answer

    async def get(self, path: str, params: dict[str, object] | None = None) -> tuple[int, bytes]:
        """``GET path?params``: the status and the body."""
        status, _, body = await self.send(self.head(request_target(path, params)))
        return status, body
