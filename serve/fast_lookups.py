"""A short path for the hottest answers: successful product lookups by SKU.

A lookup is a dictionary read, so the framework's routing and dependency injection cost more
than the work itself. This ASGI middleware answers ``GET /products/v2.0/units/{sku}`` and
``GET /products/v2.0/{unit type}/{sku}`` itself when the key is valid for the catalog and the
SKU is found, building the very same response as the routes (``json_answer``). Anything else
(a bad or missing key, a key over its rate limit, an unknown SKU, ``If-None-Match``, no
snapshot yet) goes on to the framework unchanged, so every error and 304 keeps its one
implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

from ductwork.contract import paths
from ductwork.contract.envelopes import product_lookup
from ductwork.contract.paths import Family
from serve.api_keys import SCOPE_OF
from serve.deps import presented_key
from serve.responses import json_answer

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

_RESOLVER = paths.UNITS_RESOLVER + "/"
_CATALOG = SCOPE_OF[Family.PRODUCTS]


class FastLookups:
    """Answers found SKU lookups without the framework; passes every other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            response = self._answer(scope)
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _answer(self, scope: Scope) -> Any:
        path: str = scope["path"]
        if not path.startswith(paths.PRODUCTS_PREFIX + "/"):
            return None
        request = Request(scope)
        if "if-none-match" in request.headers:
            return None
        state = request.app.state.live.get()
        if state is None:
            return None
        if path.startswith(_RESOLVER):
            record = state.catalog.resolver.get(path[len(_RESOLVER) :])
        else:  # /products/v2.0/{unit type}/{sku}, the SKU possibly holding slashes
            slug, slash, sku = path[len(paths.PRODUCTS_PREFIX) + 1 :].partition("/")
            if not slash or slug not in paths.UNIT_SLUGS:
                return None
            record = state.catalog.unit(slug, sku)
        # The key is checked last: a request the routes will answer must not count twice
        # against the key's rate limit.
        if record is None or not self._authorised(request):
            return None
        return json_answer(request, state, product_lookup(record))

    @staticmethod
    def _authorised(request: Request) -> bool:
        """A valid catalog key within its rate limit (anything else gets the routes' answer)."""
        key = presented_key(request)
        if key is None or _CATALOG not in key.scopes:
            return False
        return request.app.state.key_limit.check(key.key_hash) is None
