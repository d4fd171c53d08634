"""A short path for the hottest answers: found SKU lookups and plain list pages.

A lookup is a dictionary read and a cached list page a slice, so the framework's routing,
parameter parsing and dependency injection cost more than the work itself. This ASGI
middleware answers these requests itself, building the very same response as the routes
(``json_answer`` over the same envelopes):

- ``GET /products/v2.0/units/{sku}`` and ``GET /products/v2.0/{unit type}/{sku}`` when the SKU
  is found;
- ``GET /products/v2.0/products``, ``GET /products/v2.0/{unit type}`` and
  ``GET /warehouse/v1.0/digital-assets`` whose query holds nothing but one valid ``count``
  and/or one valid ``page``.

The key's rate limit is checked before any record is read: a request over it gets its 429
here, in the family's style. Anything else (a bad or missing key, a key without the family's
scope, an unknown SKU, a filter, a malformed or repeated parameter, ``If-None-Match``, no
snapshot yet) goes on to the framework unchanged, so every other error and 304 keeps its one
implementation; a request counted here is not counted again there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request

from ductwork.contract import params, paths
from ductwork.contract.envelopes import product_lookup
from ductwork.contract.errors import ApiError
from ductwork.contract.paths import Family
from ductwork.keys import SCOPE_OF
from serve.deps import count_against_key_limit, presented_key
from serve.live_snapshot import ServingState
from serve.responses import error_response, json_answer
from serve.routers.warehouse import digital_assets_body

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

log = logging.getLogger("ductwork.serve")
_RESOLVER = paths.UNITS_RESOLVER + "/"
_PRODUCTS = paths.PRODUCTS_PREFIX + "/"
_PAGE_PARAMETERS = frozenset({"count", "page"})


class FastAnswers:
    """Answers found SKU lookups and plain list pages without the framework; passes every
    other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            try:
                response = await self._answer(scope)
            except Exception:  # this sits outside the framework's error layer: pass it on
                log.exception("short path failed on %s; the routes answer it", scope["path"])
                response = None
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope) -> Any:
        path: str = scope["path"]
        if path.startswith(_PRODUCTS):
            family = Family.PRODUCTS
        elif path == paths.WAREHOUSE_DIGITAL_ASSETS:
            family = Family.WAREHOUSE
        else:
            return None
        request = Request(scope)
        if "if-none-match" in request.headers:
            return None
        state = request.app.state.live.get()
        if state is None:
            return None
        planned = _plan(path, scope["query_string"])
        # The key is verified only for a request this path takes (the routes verify the
        # others), and counted against its limit before any record is read for it.
        key = presented_key(request) if planned is not None else None
        if key is None or SCOPE_OF[family] not in key.scopes:
            return None
        try:
            await count_against_key_limit(request, key)
        except ApiError as error:
            return error_response(error, path)
        body = await _read(state, planned)
        return None if body is None else json_answer(request, state, body)


@dataclass(frozen=True)
class _Lookup:
    """A product lookup by SKU: through the resolver (``slug`` None) or one unit type."""

    slug: str | None
    sku: str


@dataclass(frozen=True)
class _ListPage:
    """A plain page of a list: ``products``, a unit type or the digital assets."""

    slug: str | None  # None: the digital-asset list
    number: int
    size: int


def _plan(path: str, query: bytes) -> _Lookup | _ListPage | None:
    """What this request asks for, when it is one the short path takes; nothing is read."""
    if path == paths.WAREHOUSE_DIGITAL_ASSETS:
        page = _plain_page(query)
        return None if page is None else _ListPage(None, *page)
    if path.startswith(_RESOLVER):
        return None if query else _Lookup(None, path[len(_RESOLVER) :])
    slug, slash, sku = path[len(_PRODUCTS) :].partition("/")
    if not slash:  # a list: /products/v2.0/products or /products/v2.0/{unit type}
        page = _plain_page(query)
        if page is None or (slug != "products" and slug not in paths.UNIT_SLUGS):
            return None
        return _ListPage(slug, *page)
    if slug not in paths.UNIT_SLUGS or query:  # /products/v2.0/{unit type}/{sku}
        return None
    return _Lookup(slug, sku)


async def _read(state: ServingState, planned: _Lookup | _ListPage) -> bytes | None:
    """The answer's body, or None for a SKU not found (the routes answer that)."""
    if isinstance(planned, _Lookup):
        if planned.slug is None:
            record = state.catalog.resolver.get(planned.sku)
        else:
            record = state.catalog.unit(planned.slug, planned.sku)
        return None if record is None else product_lookup(record)
    number, size = planned.number, planned.size
    if planned.slug == "products":
        return state.catalog.product_page(None, number, size)
    if planned.slug is not None:
        return state.catalog.unit_page(planned.slug, {}, number, size)
    listing = state.digital_assets
    start, end = params.page_bounds(number, size)
    records = await listing.page(start, min(end, len(listing)))
    return digital_assets_body(records, number, size, len(listing), None)


def _plain_page(query: bytes) -> tuple[int, int] | None:
    """``(page, count)`` from a query of nothing but one valid ``page`` and/or ``count``."""
    try:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=False)
    except ValueError:
        return None
    given = dict(pairs)
    if len(given) != len(pairs) or not set(given) <= _PAGE_PARAMETERS:
        return None
    try:
        return params.read_page(given.get("page")), params.read_count(given.get("count"))
    except ApiError:
        return None
