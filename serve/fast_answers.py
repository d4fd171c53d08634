"""A short path for the hottest answers: SKU lookups and list pages.

A lookup is a dictionary read and a cached list page a slice, so the framework's routing,
parameter parsing and dependency injection cost more than the work itself. This ASGI
middleware answers these requests itself, building the very same response as the routes
(the same envelopes, errors and ``responses`` helpers):

- ``GET /products/v2.0/units/{sku}`` and ``GET /products/v2.0/{unit type}/{sku}``: the record,
  its 304 when ``If-None-Match`` names its content (``serve.validators``), or the family's 404
  for an unknown SKU;
- ``GET /products/v2.0/products``, ``GET /products/v2.0/{unit type}`` and a list paged by
  number (``serve.paged_list_routes``: ``GET /warehouse/v1.0/digital-assets``) whose query
  holds nothing but one valid ``count`` and/or one valid ``page`` (and, for a list paged by
  number, one valid time filter, ``updatedAfter``): the page, or its 304, read as its route
  reads it;
- ``GET /_ductwork/v1/changes/{stream}`` whose query holds nothing but one ``since`` and at
  most one valid ``limit``, asked as JSON: the page of the walk when a worker kept it or a
  change file holds it (``serve.routers.mirror.sliced_json_page``), or its 304.

The key's rate limit is checked before any record is read, a page weighing by the records it
asks for: a request over it gets its 429 here, in the family's style. Anything else (a bad or
missing key, a key without the family's scope or the stream's, an empty SKU, any other
parameter, a malformed or repeated one, no snapshot yet) goes on to the framework unchanged, so
every other error keeps its one implementation; a request counted here is not counted again there.

The short path runs twice in the app's layers. In front of them all (``FastAnswersInFront``), it
answers requests of the present with every header the layers it skips would have added (the
request id, the data's age, Memento's links, the gzip coding), and leaves to them whatever one
of them would answer or change otherwise: a request of the past, one from a browser origin
when CORS is on, a client refused for its failures, a stream older than the maximum age.
Innermost (``FastAnswers``), it answers what reaches it, the past's layer having chosen the
snapshot: the layers outside add their headers as they pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from ductwork.contract import params, paths
from ductwork.contract.envelopes import product_lookup
from ductwork.contract.errors import ApiError, product_not_found, unit_not_found
from ductwork.contract.paths import Family
from ductwork.history import feed
from ductwork.keys import grants
from ductwork.streams.model import Stream
from ductwork.streams.registry import PRODUCTS
from serve.data_age import AgeRule
from serve.deps import count_in_scope, counted_now, key_of
from serve.failed_requests import RefusedClients, client_address
from serve.gzip_cache import AnswerCache, encode_whole
from serve.live_snapshot import PAST_STATE, ServingState
from serve.memento import asked_of, linked, present_spec_headers
from serve.observability import Metrics, record_answer, tagged, usable_request_id
from serve.one_write import WHOLE_ANSWER
from serve.paged_list_routes import PAGED_BY_NUMBER, PagedList
from serve.query_strings import query_pairs
from serve.rate_limit import page_cost
from serve.ready_answers import Ready
from serve.responses import (
    Conditions,
    error_response,
    revalidated,
    tagged_pieces,
    unjoined_body,
)
from serve.routers.mirror import JSON, NDJSON, PREFIX, STREAM_NAMES, sliced_json_page
from serve.validators import content_etag

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

log = logging.getLogger("ductwork.serve")
_RESOLVER = paths.UNITS_RESOLVER + "/"
_PRODUCTS = paths.PRODUCTS_PREFIX + "/"
_PAGE_PARAMETERS = frozenset({"count", "page"})
_FEED = PREFIX + "/changes/"
_FEED_PARAMETERS = frozenset({"since", "limit"})
# In a request's scope: how to get its answer's gzip form other than by compressing it.
GZIPPED = "ductwork.gzipped"
_NO_EXTENSIONS: dict[str, Any] = {}


class FastAnswers:
    """Answers SKU lookups and plain list pages without the framework; passes every other
    request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            try:
                response = await self._answer(scope, None)
            except Exception:  # this sits outside the framework's error layer: pass it on
                log.exception("short path failed on %s; the routes answer it", scope["path"])
                response = None
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, heads: _Heads | None) -> Any:
        """The answer to a request the short path takes, or None. ``heads``: its headers, when
        read already (read here otherwise, once the request is known to be one it takes)."""
        path: str = scope["path"]
        if path.startswith(_PRODUCTS):
            family = Family.PRODUCTS
        elif path in PAGED_BY_NUMBER:
            family = PAGED_BY_NUMBER[path].stream.family
        elif path.startswith(_FEED):
            return await self._feed_answer(scope, heads)
        else:
            return None
        query: bytes = scope["query_string"]
        planned = _plan(path, query)
        if planned is None:
            return None
        app_state = scope["app"].state
        past = scope.get(PAST_STATE)
        state = past or app_state.live.get()
        if state is None:
            return None
        # The key is verified only for a request this path takes (the routes verify the
        # others), and counted against its limit before any record is read for it.
        if heads is None:
            heads = _heads_of(scope)
        key = key_of(app_state.keys, heads.authorization)
        if key is None or not grants(key.scopes, family, path):
            return None
        cost = page_cost(planned.size) if isinstance(planned, _ListPage) else 1
        limit = app_state.key_limit
        try:
            if not counted_now(scope, limit, key, cost):
                await count_in_scope(scope, limit, key, cost)
        except ApiError as error:
            return error_response(error, path)
        # The present's list pages are kept ready (a lookup costs less than keeping it); a past
        # state is not kept long enough to gain.
        kept = None if past is not None or isinstance(planned, _Lookup) else state.ready
        ready = None if kept is None else kept.get((path, query))
        if ready is None:
            if isinstance(planned, _Lookup):
                made = _lookup_ready(state, planned)
            else:
                made = await _page_ready(state, planned)
            if made is None:
                return error_response(_not_found(planned), path)  # type: ignore[arg-type]
            ready, body = made
            if kept is not None:
                kept.put((path, query), ready)
        elif ready.body is not None:
            body = ready.body
        else:  # a page of a list paged by number: sliced again
            body = await _read(state, planned)  # type: ignore[arg-type]
        return revalidated(state, body, heads.conditions, ready.modified, ready.etag)

    async def _feed_answer(self, scope: Scope, heads: _Heads | None) -> Any:
        """A page of the changes feed that needs no read of the snapshot, or None."""
        planned = _feed_plan(scope["path"], scope["query_string"])
        app_state = scope["app"].state
        state = app_state.live.get()
        if planned is None or state is None:
            return None
        if heads is None:
            heads = _heads_of(scope)
        conditions = heads.conditions
        if conditions.accept is not None and NDJSON in conditions.accept:
            return None
        key = key_of(app_state.keys, heads.authorization)
        stream = planned.stream
        if key is None or not grants(key.scopes, stream.family, stream.path):
            return None
        limit, cost = app_state.key_limit, page_cost(planned.limit)
        try:
            if not counted_now(scope, limit, key, cost):
                await count_in_scope(scope, limit, key, cost)
        except ApiError as error:
            return error_response(error, scope["path"])
        try:
            body = sliced_json_page(
                state, app_state.feed_pages, scope["path"], stream, planned.since, planned.limit
            )
        except ApiError:  # a bad token, or history no longer kept: the route answers it
            return None
        if body is None:
            return None
        if body.gzipped is not None:
            scope[GZIPPED] = body.gzipped
        return tagged_pieces(state, body, JSON, conditions)


class FastAnswersInFront(FastAnswers):
    """The short path in front of every other layer: a request of the present it can answer
    gets the headers those layers would add, without passing through them."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        refused: RefusedClients,
        data_age: AgeRule,
        gzip_answers: AnswerCache,
        cors: bool,
    ) -> None:
        super().__init__(app)
        self.metrics = metrics
        self.refused = refused
        self.data_age = data_age
        self.gzip_answers = gzip_answers
        # With CORS on, a request from a browser origin is left to the CORS layer.
        self.passed_on = (b"accept-datetime", b"origin") if cors else (b"accept-datetime",)

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        heads = self._takes(scope)
        if heads is not None:
            started = time.perf_counter()
            synced = self.data_age.verdict(scope)
            if not isinstance(synced, ApiError):  # a stale stream is the data age layer's 503
                try:
                    response = await self._answer(scope, heads)
                except Exception:  # outside the framework's error layer: pass it on
                    log.exception("short path failed on %s; the routes answer it", scope["path"])
                    response = None
                if response is not None:
                    await self._send(scope, send, response, synced, started, heads)
                    return
        await self.app(scope, receive, send)

    def _takes(self, scope: Scope) -> _Heads | None:
        """The request's headers as the short path reads them, when no layer it skips would
        answer this request or change its answer beyond adding headers; else None."""
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        path: str = scope["path"]
        if not path.startswith((_PRODUCTS, _FEED)) and path not in PAGED_BY_NUMBER:
            return None
        heads = _read_heads(scope["headers"], self.passed_on)
        # Parsing the address costs more than the rest: only when some client is refused.
        if heads is None or (self.refused and self.refused.refusing(client_address(scope))):
            return None
        return heads

    def _with_memento_headers(
        self, scope: Scope, headers: list[tuple[bytes, bytes]]
    ) -> list[tuple[bytes, bytes]]:
        """``headers`` of an answer of the present to this request (changed in place) with
        what Memento's layer adds: on a spec path, ``Vary: Accept-Datetime`` and the links."""
        if scope["path"].startswith(_FEED):  # no spec path: the layer adds nothing
            return headers
        for name, _ in headers:
            if name == b"vary":  # none of ours has one: merged as the layer does
                asked = asked_of(scope)
                return headers if asked is None else linked(headers, asked)
        # Every other path the short path takes is a spec path with mementos.
        raw_path = scope.get("raw_path") or scope["path"].encode()
        headers += present_spec_headers(raw_path, scope["query_string"])
        return headers

    async def _send(
        self,
        scope: Scope,
        send: Callable,
        response: Any,
        synced: bytes | None,
        started: float,
        heads: _Heads,
    ) -> None:
        """Send ``response`` with the headers of the layers skipped, in their order (the
        data's age, Memento's, the gzip coding's, the request id's), then count and log it."""
        request_id = usable_request_id(heads.request_id)
        status: int = response.status_code
        headers = list(response.raw_headers)
        if synced is not None:
            headers.append((b"x-synced-at", synced))
        headers = self._with_memento_headers(scope, headers)
        if heads.gzip is not None:  # otherwise the gzip layer sends the answer as it is
            unjoined, gzipped = unjoined_body(response), scope.get(GZIPPED)
            body = await encode_whole(
                self.gzip_answers, scope, status, headers, unjoined, gzipped, heads.gzip
            )
        else:
            body = response.body
        tagged(headers, request_id)
        whole = scope.get("extensions", _NO_EXTENSIONS).get(WHOLE_ANSWER)
        try:
            if whole is None or not whole(status, headers, body):
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
        finally:
            record_answer(self.metrics, scope, status, started, request_id)


_CONDITIONS = (b"if-none-match", b"if-modified-since", b"accept-encoding", b"accept")


class _Heads(NamedTuple):
    """What the short path reads in a request's headers, in one pass over them."""

    authorization: str  # the first Authorization value, empty when absent
    conditions: Conditions  # as Starlette's ``Headers.get`` reads them
    request_id: str  # the first X-Request-ID, empty when absent
    gzip: bytes | None  # as ``gzip_cache.first_accept_encoding`` reads it


def _heads_of(scope: Scope) -> _Heads:
    """The request's headers as the short path reads them (none passed on)."""
    heads = _read_heads(scope["headers"])
    assert heads is not None  # only a header named in ``passed_on`` gives None
    return heads


def _read_heads(
    headers: list[tuple[bytes, bytes]], passed_on: tuple[bytes, ...] = ()
) -> _Heads | None:
    """The request's headers as the short path reads them; None when one is named in
    ``passed_on``."""
    authorization = None
    request_id = None
    found: dict[bytes, str] = {}
    first_encoding = None
    takes_gzip = False
    for name, value in headers:
        if name == b"authorization":
            if authorization is None:
                authorization = value.decode("latin-1")
        elif name in _CONDITIONS:
            if name not in found:
                found[name] = value.decode("latin-1")
            if name == b"accept-encoding":
                first_encoding = value if first_encoding is None else first_encoding
                takes_gzip = takes_gzip or b"gzip" in value
        elif name == b"x-request-id":
            if request_id is None:
                request_id = value.decode("latin-1")
        elif name in passed_on:
            return None
    return _Heads(
        authorization or "",
        Conditions(*(found.get(name) for name in _CONDITIONS)),
        request_id or "",
        first_encoding if takes_gzip else None,
    )


@dataclass(frozen=True)
class _Lookup:
    """A product lookup by SKU: through the resolver (``slug`` None) or one unit type."""

    slug: str | None
    sku: str


@dataclass(frozen=True)
class _ListPage:
    """A page of a list: ``products``, a unit type (``slug``) or a list paged by number
    (``listed``, with its time filter ``after``)."""

    slug: str | None  # None: a list paged by number
    number: int
    size: int
    after: datetime | None = None
    listed: PagedList | None = None


def _plan(path: str, query: bytes) -> _Lookup | _ListPage | None:
    """What this request asks for, when it is one the short path takes; nothing is read."""
    listed = PAGED_BY_NUMBER.get(path)
    if listed is not None:
        given = _single_parameters(query, listed.parameters)
        if given is None:
            return None
        try:
            number, size, after = listed.read_query(given)
        except ApiError:
            return None  # the routes answer the error
        return _ListPage(None, number, size, after, listed)
    if path.startswith(_RESOLVER):
        sku = path[len(_RESOLVER) :]
        return None if query or not sku else _Lookup(None, sku)
    slug, slash, sku = path[len(_PRODUCTS) :].partition("/")
    if not slash:  # a list: /products/v2.0/products or /products/v2.0/{unit type}
        page = _plain_page(query)
        if page is None or (slug != "products" and slug not in paths.UNIT_SLUGS):
            return None
        return _ListPage(slug, *page)
    if slug not in paths.UNIT_SLUGS or query or not sku:  # /products/v2.0/{unit type}/{sku}
        return None
    return _Lookup(slug, sku)


def _find(state: ServingState, lookup: _Lookup) -> bytes | None:
    """The record a lookup names, or None."""
    if lookup.slug is None:
        return state.catalog.resolver.get(lookup.sku)
    return state.catalog.unit(lookup.slug, lookup.sku)


def _lookup_ready(state: ServingState, lookup: _Lookup) -> tuple[Ready, bytes] | None:
    """A lookup's answer made ready, and its body; None for an unknown SKU."""
    record = _find(state, lookup)
    if record is None:
        return None
    body = product_lookup(record)
    modified = state.times.of(PRODUCTS.name, lookup.sku)
    return Ready(body, content_etag(body), modified), body


async def _page_ready(state: ServingState, page: _ListPage) -> tuple[Ready, bytes]:
    """A list page's answer made ready, and its body. A page of a list paged by number, a slice
    of the record file, is kept without its body."""
    body = await _read(state, page)
    return Ready(body if page.slug is not None else None, content_etag(body)), body


def _not_found(lookup: _Lookup) -> ApiError:
    """The routes' 404 for a lookup that found nothing."""
    if lookup.slug is None:
        return product_not_found(lookup.sku)
    return unit_not_found(lookup.slug, lookup.sku)


async def _read(state: ServingState, planned: _ListPage) -> bytes:
    """The body of a list page, read from the snapshot."""
    number, size = planned.number, planned.size
    if planned.slug == "products":
        return state.catalog.product_page(None, number, size)
    if planned.slug is not None:
        return state.catalog.unit_page(planned.slug, {}, number, size)
    assert planned.listed is not None
    return await planned.listed.page(state, number, size, planned.after)


@dataclass(frozen=True)
class _FeedPage:
    """A page of a stream's walk since a token."""

    stream: Stream
    since: str
    limit: int


def _feed_plan(path: str, query: bytes) -> _FeedPage | None:
    """The feed page a request asks for, when the short path takes it: a walk since a token
    (the initial load reads the snapshot), without ``wait``."""
    stream = STREAM_NAMES.get(path[len(_FEED) :])
    given = _single_parameters(query, _FEED_PARAMETERS)
    if stream is None or given is None or not given.get("since"):
        return None
    try:
        limit = params.read_int("limit", given.get("limit"), feed.DEFAULT_LIMIT, 1, feed.MAX_LIMIT)
    except ApiError:
        return None
    return _FeedPage(stream, given["since"], limit)


def _single_parameters(query: bytes, allowed: frozenset[str]) -> dict[str, str] | None:
    """The query's parameters when each is one of ``allowed`` and none is repeated."""
    try:
        pairs = query_pairs(query)
    except ValueError:
        return None
    given = dict(pairs)
    if len(given) != len(pairs) or not set(given) <= allowed:
        return None
    return given


def _plain_page(query: bytes) -> tuple[int, int] | None:
    """``(page, count)`` from a query of nothing but one valid ``page`` and/or ``count``."""
    given = _single_parameters(query, _PAGE_PARAMETERS)
    if given is None:
        return None
    try:
        return params.read_page(given.get("page")), params.read_count(given.get("count"))
    except ApiError:
        return None
