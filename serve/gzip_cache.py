"""Gzip for requests that accept it, compressing each snapshot answer once per worker.

Starlette's gzip layer compresses every answer anew, at its highest level: for a page of a
hundred records that is a millisecond or more, many times the cost of building the page. An
answer tagged with a snapshot (``X-Snapshot-Version``, a 200 from the snapshot alone) is the
same bytes for the same path and parameters as long as that snapshot is served, so its
compressed form is kept, keyed by (snapshot version, path, the query parameters its route reads),
in a cache of bounded size that drops the least recently used answers first. A new snapshot has
a new version: its answers are never taken for an earlier snapshot's. Every other answer is
compressed as Starlette does it.

The key holds the parameters the route reads (the last value of each, as the route takes it),
not the raw query: parameters a route ignores cannot make a new key for the same answer, so
padding a query does not fill the cache. The cache's size counts each entry whole, key and
bookkeeping included, not only its compressed bytes.

The headers are Starlette's own (``Content-Encoding: gzip``, ``Vary: Accept-Encoding``, the
compressed ``Content-Length``) but for the ETag, which takes its gzip form (``serve.validators``),
and the body is valid gzip, written by ISA-L's deflate (``isal``) at its level 1 rather than
zlib's at Starlette's default level 9: a small share of the time for a slightly larger body.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from isal import isal_zlib
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.gzip import GZipMiddleware, GZipResponder, IdentityResponder
from starlette.types import ASGIApp, Receive, Scope, Send

from serve.erasures import Erasures
from serve.pieced_body import PiecedBody, bytes_of
from serve.query_strings import query_pairs
from serve.validators import with_gzip

# ISA-L's level 0 to 3; the bodies are JSON, which even level 1 shrinks about sevenfold.
GZIP_LEVEL = 1
GZIP_WBITS = 16 + isal_zlib.MAX_WBITS  # a gzip stream, as Starlette writes
CACHE_BYTES = 32 << 20  # per worker, unless the settings say otherwise
# Smaller bodies go out as they are: compressing them saves less than it costs.
GZIP_MINIMUM_BYTES = 1024
# Bodies up to this size are compressed in the event loop: ISA-L's level 1 takes about 1.7 ms
# for 1 MiB of JSON, less than handing the body to a worker thread and waiting for it costs a
# busy worker (Starlette's own limit is 128 KiB, sized for zlib's level 9).
INLINE_GZIP_BYTES = 1 << 20
# (snapshot version, path, the route's parameters as sorted (name, value) pairs, media type:
# one path may answer in more than one, by the request's Accept)
Parameters = tuple[tuple[str, str], ...]
AnswerKey = tuple[bytes, str, Parameters, bytes]
# An entry's share of the ordered dictionary (its slot and link) and of the key's tuple, on top
# of what ``sys.getsizeof`` reports for the objects themselves; generous on purpose.
ENTRY_OVERHEAD_BYTES = 256


def entry_bytes(key: AnswerKey, compressed: bytes) -> int:
    """The memory an entry holds, as counted against the cache's limit."""
    version, path, parameters, media_type = key
    size = ENTRY_OVERHEAD_BYTES + sys.getsizeof(compressed) + sys.getsizeof(version)
    size += sys.getsizeof(media_type)
    size += sys.getsizeof(path) + sys.getsizeof(parameters)
    for name, value in parameters:
        size += sys.getsizeof(name) + sys.getsizeof(value) + 56  # 56: the pair's tuple
    return size


class AnswerCache:
    """Answers' bytes (here: compressed) by (snapshot version, path, parameters, media type),
    least recently used dropped first beyond ``limit_bytes`` of entries (keys and bookkeeping
    counted, see ``entry_bytes``). Used from the event loop only. With ``erasures``, every
    answer is dropped once a new erasure is seen (answers of earlier publishes may hold what
    was erased; the current one's feed pages too, read from a change file since rewritten)."""

    def __init__(self, limit_bytes: int = CACHE_BYTES, erasures: Erasures | None = None) -> None:
        self.limit_bytes = limit_bytes
        self.size_bytes = 0
        self._answers: OrderedDict[AnswerKey, bytes] = OrderedDict()
        self._erasures = erasures
        self._generation = 0

    def _follow_erasures(self) -> None:
        if self._erasures is not None and self._erasures.generation != self._generation:
            self._generation = self._erasures.generation
            self._answers.clear()
            self.size_bytes = 0

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: AnswerKey) -> bytes | None:
        """The compressed answer, if kept."""
        self._follow_erasures()
        found = self._answers.get(key)
        if found is not None:
            self._answers.move_to_end(key)
        return found

    def put(self, key: AnswerKey, compressed: bytes) -> None:
        """Keep an answer, dropping the least recently used ones over the limit; one larger
        than the whole limit is not kept."""
        self._follow_erasures()
        size = self.size_of(key, compressed)
        if size > self.limit_bytes or key in self._answers:
            return
        self._answers[key] = compressed
        self.size_bytes += size
        while self.size_bytes > self.limit_bytes:
            dropped_key, dropped = self._answers.popitem(last=False)
            self.size_bytes -= self.size_of(dropped_key, dropped)

    def size_of(self, key: Any, answer: Any) -> int:
        """The memory an entry holds, as counted against the limit."""
        return entry_bytes(key, answer)


class RouteParameters:
    """The query parameters the route that answered a request reads: what a snapshot answer
    depends on besides its path.

    The framework's router notes the route it chose in the request's scope (``route``), which
    the gzip layer sees once the answer starts. An answer no route made (the short path's)
    depends on every parameter of its query, since the short path takes only queries made of
    parameters it reads.
    """

    def __init__(self) -> None:
        self._names: dict[int, frozenset[str]] = {}

    def key_of(self, scope: Scope) -> Parameters:
        """The (name, value) pairs of the request's query that its answer depends on, sorted
        by name; a repeated parameter counts with its last value, as the routes read it."""
        query: bytes = scope["query_string"]
        if not query:
            return ()
        route = scope.get("route")
        names = self._names_of(route) if isinstance(route, APIRoute) else None
        if names is not None and not names:
            return ()
        given = dict(query_pairs(query))
        return tuple(sorted((n, v) for n, v in given.items() if names is None or n in names))

    def _names_of(self, route: APIRoute) -> frozenset[str]:
        found = self._names.get(id(route))
        if found is None:
            found = self._names[id(route)] = frozenset(_query_names(route.dependant))
        return found


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route and its dependencies read, by the name sent."""
    names = {field.alias for field in dependant.query_params}
    for inner in dependant.dependencies:
        names |= _query_names(inner)
    return names


def _snapshot_version(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    return _header(headers, b"x-snapshot-version")


def _header(headers: list[tuple[bytes, bytes]], wanted: bytes) -> bytes | None:
    for name, value in headers:
        if name == wanted:
            return value
    return None


def _mark_compressed_etag(headers: list[tuple[bytes, bytes]]) -> None:
    """Give the ETag, if any, its gzip form: another content coding, another representation."""
    for index, (name, value) in enumerate(headers):
        if name == b"etag":
            headers[index] = (name, with_gzip(value))


class _CachingGzipResponder(GZipResponder):
    """Starlette's gzip responder, taking a snapshot answer's compressed body from the cache."""

    def __init__(
        self, app: ASGIApp, minimum_size: int, cache: AnswerCache, routes: RouteParameters
    ) -> None:
        super().__init__(
            app,
            minimum_size,
            GZIP_LEVEL,
            exclude_content_types=(),
            thread_minimum_size=INLINE_GZIP_BYTES,
        )
        self.cache = cache
        self.routes = routes
        self.scope: Scope = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        await super().__call__(scope, receive, send)

    @property
    def compressor(self) -> Any:
        """ISA-L's deflate in place of zlib's: a 420 kB feed page took 0.69 ms at its level 1
        against zlib's 2.5 ms at level 1, for a smaller body (measured on this machine)."""
        if self._compressor is None:
            self._compressor = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, GZIP_WBITS)
        return self._compressor

    async def apply_compression(self, body: bytes, *, more_body: bool) -> bytes:
        start = self.initial_message
        if self._compressor is None:  # the first chunk: this body goes out compressed
            _mark_compressed_etag(start.get("headers") or [])
        version = None
        if not more_body and self._compressor is None and start.get("status") == 200:
            version = _snapshot_version(start.get("headers") or [])
        if version is None:  # a streamed body, or an answer not from the snapshot alone
            return await super().apply_compression(body, more_body=more_body)
        media_type = _header(start.get("headers") or [], b"content-type") or b""
        key = (version, self.scope["path"], self.routes.key_of(self.scope), media_type)
        return await compressed(self.cache, key, body)


class CompressWhenAsked(GZipMiddleware):
    """Starlette's gzip layer, entered only by a request that accepts gzip, with snapshot
    answers compressed once (``AnswerCache``).

    Without gzip in ``Accept-Encoding`` the layer would still inspect every answer's headers
    on every request only to send it as it is.
    """

    def __init__(self, app: ASGIApp, minimum_size: int, answers: AnswerCache | None = None) -> None:
        # The API answers JSON and metrics text only: no type needs excluding, and an empty
        # list spares Starlette normalising its default list of fifteen on every request.
        super().__init__(app, minimum_size, GZIP_LEVEL, exclude_content_types=())
        self.answers = answers if answers is not None else AnswerCache()
        self.routes = RouteParameters()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _any_accepts_gzip(scope):
            await self.app(scope, receive, send)
            return
        # As Starlette decides: by the first Accept-Encoding header.
        responder: Any
        if "gzip" in Headers(scope=scope).get("Accept-Encoding", ""):
            responder = _CachingGzipResponder(
                self.app, self.minimum_size, self.answers, self.routes
            )
        else:
            responder = IdentityResponder(self.app, self.minimum_size, exclude_content_types=())
        await responder(scope, receive, send)


def _any_accepts_gzip(scope: MutableMapping[str, Any]) -> bool:
    return any(name == b"accept-encoding" and b"gzip" in value for name, value in scope["headers"])


def first_accept_encoding(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The request's first ``Accept-Encoding`` (by which the gzip layer decides), when some
    ``Accept-Encoding`` takes gzip (without one, the layer is passed through); else None."""
    first = None
    takes_gzip = False
    for name, value in headers:
        if name == b"accept-encoding":
            first = value if first is None else first
            takes_gzip = takes_gzip or b"gzip" in value
    return first if takes_gzip else None


# ``encode_whole``'s ``first`` when the caller has not read the request's headers.
UNREAD = object()
# The parameters of an answer no route made: every one of its query.
_ROUTELESS = RouteParameters()


async def compressed(
    answers: AnswerCache,
    key: AnswerKey | None,
    body: bytes | PiecedBody,
    gzipped: Callable[[], bytes] | None = None,
) -> bytes:
    """``body`` compressed whole: from ``answers`` under ``key`` (a snapshot answer), or now
    (by ``gzipped`` when given) and then kept there; in a worker thread above
    ``INLINE_GZIP_BYTES``."""
    found = answers.get(key) if key is not None else None
    if found is None:
        if gzipped is not None:
            found = gzipped()
        elif len(body) < INLINE_GZIP_BYTES:
            found = compress(bytes_of(body))
        else:
            found = await run_in_threadpool(compress, bytes_of(body))
        if key is not None:
            answers.put(key, found)
    return found


def compress(body: bytes) -> bytes:
    """``body`` as one gzip stream, the bytes the gzip layer writes for it."""
    compressor = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, GZIP_WBITS)
    return compressor.compress(body) + compressor.flush()


async def encode_whole(
    answers: AnswerCache,
    scope: Scope,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes | PiecedBody,
    gzipped: Callable[[], bytes] | None = None,
    first: bytes | object | None = UNREAD,
) -> bytes:
    """The body to send for a whole answer (``headers`` changed in place), as the gzip layer
    would send it to ``scope``'s request: compressed (a snapshot answer from the cache) when
    its first ``Accept-Encoding`` takes gzip and the body is large enough, with ``Vary``,
    ``Content-Encoding``, ``Content-Length`` and the ETag's gzip form as that layer sets them;
    as it is otherwise. ``gzipped`` gives the gzip form faster than compressing ``body``, if
    it is known; ``first``, what ``first_accept_encoding`` finds in the request, if read
    already. A body in pieces is joined only if it is sent as it is. For the short path,
    which answers before that layer."""
    if first is UNREAD:
        first = first_accept_encoding(scope["headers"])
    assert first is None or isinstance(first, bytes)
    if first is None or len(body) < GZIP_MINIMUM_BYTES:
        return bytes_of(body)
    sent = body
    if b"gzip" in first:
        _mark_compressed_etag(headers)
        version = _snapshot_version(headers) if status == 200 else None
        key = None
        if version is not None:
            media_type = _header(headers, b"content-type") or b""
            key = (version, scope["path"], _ROUTELESS.key_of(scope), media_type)
        sent = await compressed(answers, key, body, gzipped)
    changed = MutableHeaders(raw=headers)
    changed.add_vary_header("Accept-Encoding")
    if sent is not body:
        changed["Content-Encoding"] = "gzip"
        changed["Content-Length"] = str(len(sent))
    return bytes_of(sent)
