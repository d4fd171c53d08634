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

Anything else (a bad or missing key, a key without the family's scope or over its rate limit,
an unknown SKU, a filter, a malformed or repeated parameter, ``If-None-Match``, no snapshot
yet) goes on to the framework unchanged, so every error and 304 keeps its one implementation.
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
from serve.deps import presented_key
from serve.live_snapshot import ServingState
from serve.responses import json_answer
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
        planned = _body(state, path, scope["query_string"])
        # The key is verified only for a request this path takes (the routes verify the
        # others), before any records are read for it.
        key = presented_key(request) if planned is not None else None
        if key is None or SCOPE_OF[family] not in key.scopes:
            return None
        body = await planned.read(state) if isinstance(planned, _AssetPage) else planned
        # The rate limit is checked last: a request the routes will answer must not count
        # twice against the key's limit.
        if request.app.state.key_limit.check(key.key_hash) is not None:
            return None
        return json_answer(request, state, body)


@dataclass(frozen=True)
class _AssetPage:
    """A digital-asset list page to read (possibly from the snapshot, off the event loop)."""

    number: int
    size: int

    async def read(self, state: ServingState) -> bytes:
        listing = state.digital_assets
        start, end = params.page_bounds(self.number, self.size)
        records = await listing.page(start, min(end, len(listing)))
        return digital_assets_body(records, self.number, self.size, len(listing), None)


def _body(state: ServingState, path: str, query: bytes) -> bytes | _AssetPage | None:
    """The answer's body (or the asset page to read for it), when this is a request the short
    path takes."""
    if path == paths.WAREHOUSE_DIGITAL_ASSETS:
        page = _plain_page(query)
        return None if page is None else _AssetPage(*page)
    if path.startswith(_RESOLVER):
        if query:
            return None
        record = state.catalog.resolver.get(path[len(_RESOLVER) :])
        return None if record is None else product_lookup(record)
    slug, slash, sku = path[len(_PRODUCTS) :].partition("/")
    if not slash:  # a list: /products/v2.0/products or /products/v2.0/{unit type}
        page = _plain_page(query)
        if page is None:
            return None
        number, size = page
        if slug == "products":
            return state.catalog.product_page(None, number, size)
        if slug in paths.UNIT_SLUGS:
            return state.catalog.unit_page(slug, {}, number, size)
        return None
    if slug not in paths.UNIT_SLUGS or query:  # /products/v2.0/{unit type}/{sku}
        return None
    record = state.catalog.unit(slug, sku)
    return None if record is None else product_lookup(record)


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
