"""An S3 endpoint in front of a real one (moto's server) that refuses writes under chosen key
prefixes with ``403 AccessDenied``, as a bucket policy would; everything else is passed on."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

from sandbox.asgi import Receive, Scope, Send, read_body, serve_lifespan
from sandbox.local_server import serving

DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)


class DenyingStore:
    """ASGI app: PUTs to ``/<bucket>/<key>`` with a denied key prefix are refused; the rest
    go to ``target`` unchanged. ``denied_puts`` counts the refusals."""

    def __init__(self, target: str, bucket: str, denied_prefixes: tuple[str, ...]) -> None:
        self._target = urlsplit(target)
        self._bucket = bucket
        self._denied = denied_prefixes
        self.denied_puts = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        body = await read_body(receive, limit=64 << 20)
        raw_path = scope["raw_path"].decode("latin-1")
        key = unquote(raw_path).removeprefix(f"/{self._bucket}/")
        if scope["method"] == "PUT" and key.startswith(self._denied):
            self.denied_puts += 1
            status, headers, answer = 403, [(b"content-type", b"application/xml")], DENIED
        else:
            query = scope["query_string"].decode("latin-1")
            target = raw_path + (f"?{query}" if query else "")
            status, headers, answer = await asyncio.to_thread(
                self._forward, scope["method"], target, scope["headers"], body
            )
        headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(answer)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    def _forward(
        self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        connection = http.client.HTTPConnection(
            self._target.hostname, self._target.port, timeout=30
        )
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in (b"content-length", b"transfer-encoding", b"connection"):
                    connection.putheader(name.decode("latin-1"), value.decode("latin-1"))
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            answer = response.read()
            passed = [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in response.getheaders()
                if name.lower() not in ("transfer-encoding", "connection")
            ]
            return response.status, passed, answer
        finally:
            connection.close()


@contextmanager
def denying_store(
    target: str, bucket: str, denied_prefixes: tuple[str, ...]
) -> Iterator[tuple[str, DenyingStore]]:
    """The gate on a free loopback port: its endpoint URL and the app (for its counter)."""
    app = DenyingStore(target, bucket, denied_prefixes)
    with serving(app) as url:
        yield url, app
