"""A short path for the hottest answers: SKU lookups and list pages.

A lookup is a dictionary read and a cached list page a slice, so the framework's routing,
parameter parsing and dependency injection cost more than the work itself. This ASGI
middleware answers these requests itself, building the very same response as the routes
(the same envelopes, errors and ``responses`` helpers):

- ``GET /products/v2.0/units/{sku}`` and ``GET /products/v2.0/{unit type}/{sku}``: the record,
  its 304 when ``If-None-Match`` names its content (``serve.validators``), or the family's 404
  for an unknown SKU;
- ``GET /products/v2.0/products``, ``GET /products/v2.0/{unit type}`` and
  ``GET /warehouse/v1.0/digital-assets`` whose query holds nothing but one valid ``count``
  and/or one valid ``page`` (and, for the digital assets, one valid ``updatedAfter``): the
  page, or its 304.

The key's rate limit is checked before any record is read, a page weighing by the records it
asks for: a request over it gets its 429 here, in the family's style. Anything else (a bad or
missing key, a key without the family's scope or the stream's, an empty SKU, any other
parameter, a malformed or repeated one, no snapshot yet) goes on to the framework unchanged, so
every other error keeps its one implementation; a request counted here is not counted again there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from ductwork.contract import params, paths
from ductwork.contract.envelopes import product_lookup
from ductwork.contract.errors import ApiError, product_not_found, unit_not_found
from ductwork.contract.paths import Family
from ductwork.keys import grants
from ductwork.streams.registry import PRODUCTS
from serve.deps import count_in_scope, key_of
from serve.live_snapshot import PAST_STATE, ServingState
from serve.rate_limit import page_cost
from serve.responses import Conditions, error_response, revalidated
from serve.routers.warehouse import digital_assets_page

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

log = logging.getLogger("ductwork.serve")
_RESOLVER = paths.UNITS_RESOLVER + "/"
_PRODUCTS = paths.PRODUCTS_PREFIX + "/"
_PAGE_PARAMETERS = frozenset({"count", "page"})
_ASSET_PARAMETERS = frozenset({"count", "page", "updatedAfter"})


class FastAnswers:
    """Answers SKU lookups and plain list pages without the framework; passes every other
    request on."""

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
        planned = _plan(path, scope["query_string"])
        if planned is None:
            return None
        app_state = scope["app"].state
        state = scope.get(PAST_STATE) or app_state.live.get()
        if state is None:
            return None
        authorization, conditions = _request_headers(scope["headers"])
        # The key is verified only for a request this path takes (the routes verify the
        # others), and counted against its limit before any record is read for it.
        key = key_of(app_state.keys, authorization)
        if key is None or not grants(key.scopes, family, path):
            return None
        cost = page_cost(planned.size) if isinstance(planned, _ListPage) else 1
        try:
            await count_in_scope(scope, app_state.key_limit, key, cost)
        except ApiError as error:
            return error_response(error, path)
        if isinstance(planned, _Lookup):
            record = _find(state, planned)
            if record is None:
                return error_response(_not_found(planned), path)
            modified = state.times.of(PRODUCTS.name, planned.sku)
            return revalidated(state, product_lookup(record), conditions, modified)
        return revalidated(state, await _read(state, planned), conditions)


_CONDITIONS = (b"if-none-match", b"if-modified-since", b"accept-encoding")


def _request_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str, Conditions]:
    """The first ``Authorization`` value (empty when absent) and the request's conditions, as
    Starlette's ``Headers.get`` reads them."""
    authorization = None
    found: dict[bytes, str] = {}
    for name, value in headers:
        if name == b"authorization":
            if authorization is None:
                authorization = value.decode("latin-1")
        elif name in _CONDITIONS and name not in found:
            found[name] = value.decode("latin-1")
    return authorization or "", Conditions(*(found.get(name) for name in _CONDITIONS))


@dataclass(frozen=True)
class _Lookup:
    """A product lookup by SKU: through the resolver (``slug`` None) or one unit type."""

    slug: str | None
    sku: str


@dataclass(frozen=True)
class _ListPage:
    """A page of a list: ``products``, a unit type or the digital assets (``updatedAfter``
    for those only)."""

    slug: str | None  # None: the digital-asset list
    number: int
    size: int
    after: datetime | None = None


def _plan(path: str, query: bytes) -> _Lookup | _ListPage | None:
    """What this request asks for, when it is one the short path takes; nothing is read."""
    if path == paths.WAREHOUSE_DIGITAL_ASSETS:
        given = _single_parameters(query, _ASSET_PARAMETERS)
        if given is None:
            return None
        try:
            number = params.read_page(given.get("page"))
            size = params.read_count(given.get("count"))
            after = params.read_datetime("updatedAfter", given.get("updatedAfter"))
        except ApiError:
            return None  # the routes answer the error
        return _ListPage(None, number, size, after)
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
    return await digital_assets_page(state, number, size, planned.after)


def _single_parameters(query: bytes, allowed: frozenset[str]) -> dict[str, str] | None:
    """The query's parameters when each is one of ``allowed`` and none is repeated."""
    try:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=False)
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
