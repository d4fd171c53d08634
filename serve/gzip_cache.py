"""Gzip for requests that accept it, compressing each snapshot answer once per worker.

Starlette's gzip layer compresses every answer anew, at its highest level: for a page of a
hundred records that is a millisecond or more, many times the cost of building the page. An
answer tagged with a snapshot (``X-Snapshot-Version``, a 200 from the snapshot alone) is the
same bytes for the same path and query as long as that snapshot is served, so its compressed
form is kept, keyed by (snapshot version, path, query), in a cache of bounded size that drops
the least recently used answers first. A new snapshot has a new version: its answers are never
taken for an earlier snapshot's. Every other answer is compressed as Starlette does it.

The headers are Starlette's own (``Content-Encoding: gzip``, ``Vary: Accept-Encoding``, the
compressed ``Content-Length``) and the body is valid gzip; only its deflate level is lower
than Starlette's default, the level that costs a tenth of the time for a slightly larger body.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipMiddleware, GZipResponder, IdentityResponder
from starlette.types import ASGIApp, Receive, Scope, Send

# zlib's level 1 to 9; the bodies are JSON, which even level 1 shrinks about sevenfold.
GZIP_LEVEL = 1
CACHE_BYTES = 32 << 20  # per worker, unless the settings say otherwise
AnswerKey = tuple[bytes, str, bytes]


class CompressedAnswers:
    """Compressed answers by (snapshot version, path, query), least recently used dropped
    first beyond ``limit_bytes`` (of compressed bytes). Used from the event loop only."""

    def __init__(self, limit_bytes: int = CACHE_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.size_bytes = 0
        self._answers: OrderedDict[AnswerKey, bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: AnswerKey) -> bytes | None:
        """The compressed answer, if kept."""
        found = self._answers.get(key)
        if found is not None:
            self._answers.move_to_end(key)
        return found

    def put(self, key: AnswerKey, compressed: bytes) -> None:
        """Keep an answer, dropping the least recently used ones over the limit; one larger
        than the whole limit is not kept."""
        if len(compressed) > self.limit_bytes or key in self._answers:
            return
        self._answers[key] = compressed
        self.size_bytes += len(compressed)
        while self.size_bytes > self.limit_bytes:
            _, dropped = self._answers.popitem(last=False)
            self.size_bytes -= len(dropped)


def _snapshot_version(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"x-snapshot-version":
            return value
    return None


class _CachingGzipResponder(GZipResponder):
    """Starlette's gzip responder, taking a snapshot answer's compressed body from the cache."""

    def __init__(self, app: ASGIApp, minimum_size: int, cache: CompressedAnswers) -> None:
        super().__init__(app, minimum_size, GZIP_LEVEL, exclude_content_types=())
        self.cache = cache
        self.key: tuple[str, bytes] = ("", b"")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.key = (scope["path"], scope["query_string"])
        await super().__call__(scope, receive, send)

    async def apply_compression(self, body: bytes, *, more_body: bool) -> bytes:
        start = self.initial_message
        version = None
        if not more_body and self._compressor is None and start.get("status") == 200:
            version = _snapshot_version(start.get("headers") or [])
        if version is None:  # a streamed body, or an answer not from the snapshot alone
            return await super().apply_compression(body, more_body=more_body)
        key = (version, *self.key)
        found = self.cache.get(key)
        if found is None:
            found = await super().apply_compression(body, more_body=False)
            self.cache.put(key, found)
        return found


class CompressWhenAsked(GZipMiddleware):
    """Starlette's gzip layer, entered only by a request that accepts gzip, with snapshot
    answers compressed once (``CompressedAnswers``).

    Without gzip in ``Accept-Encoding`` the layer would still inspect every answer's headers
    on every request only to send it as it is.
    """

    def __init__(self, app: ASGIApp, minimum_size: int, cache_bytes: int = CACHE_BYTES) -> None:
        # The API answers JSON and metrics text only: no type needs excluding, and an empty
        # list spares Starlette normalising its default list of fifteen on every request.
        super().__init__(app, minimum_size, GZIP_LEVEL, exclude_content_types=())
        self.answers = CompressedAnswers(cache_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _any_accepts_gzip(scope):
            await self.app(scope, receive, send)
            return
        # As Starlette decides: by the first Accept-Encoding header.
        responder: Any
        if "gzip" in Headers(scope=scope).get("Accept-Encoding", ""):
            responder = _CachingGzipResponder(self.app, self.minimum_size, self.answers)
        else:
            responder = IdentityResponder(self.app, self.minimum_size, exclude_content_types=())
        await responder(scope, receive, send)


def _any_accepts_gzip(scope: MutableMapping[str, Any]) -> bool:
    return any(name == b"accept-encoding" and b"gzip" in value for name, value in scope["headers"])
