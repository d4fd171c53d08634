"""Request dependencies of the read API, as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, Request

from ductwork.contract import params, paths
from ductwork.contract.errors import ApiError, ErrorCode, rate_limited, unauthorized
from ductwork.contract.paths import family_of
from ductwork.history.feed import DEFAULT_LIMIT, MAX_LIMIT
from ductwork.keys import OPS_SCOPE, ApiKey, KeyFile, grants, lacking
from ductwork.streams.model import Serving
from ductwork.streams.registry import PAIRINGS, served_as
from serve.live_snapshot import PAST_STATE, ServingState
from serve.rate_limit import RequestLimit, page_cost

# The lists paged by ``count``: a request for a page weighs by the records it asks for.
PAGED_LISTS = frozenset(
    {
        paths.PRODUCTS_LIST,
        PAIRINGS.path,
        *(paths.unit_path(slug) for slug in paths.UNIT_SLUGS),
        *(stream.path for stream in served_as(Serving.PAGED_LIST)),
        *(stream.path for stream in served_as(Serving.CURSOR_LIST)),
    }
)
# The changes feed, whose pages weigh by the entries they ask for (``limit``) as list pages do.
FEED_PATH = "/_ductwork/v1/changes/"


# Both are ``async``: they do no blocking work, and a plain ``def`` dependency costs a trip
# through the thread pool on every request.
async def serving_state(request: Request) -> ServingState:
    """The snapshot this request is answered from (a past one, for a request of the past);
    503 before the first publish."""
    state = request.scope.get(PAST_STATE) or request.app.state.live.get()
    if state is None:
        raise ApiError(ErrorCode.UNAVAILABLE, "No snapshot has been published yet")
    return state


def presented_key(request: Request) -> ApiKey | None:
    """The active key the request presents as ``Authorization: Bearer KEY``, or None."""
    return key_of(request.app.state.keys, request.headers.get("authorization", ""))


def key_of(keys: KeyFile, authorization: str) -> ApiKey | None:
    """The active key an ``Authorization`` header value presents as ``Bearer KEY``, or None."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return keys.verify(token.strip())


# Set in the ASGI scope once a request has been counted against its key's limit, so that a
# request the short path counted and then handed to the routes is not counted twice; it also
# tells that the request presented a valid key.
KEY_COUNTED = "ductwork.key_counted"


def request_cost(path: str, query: Mapping[str, str]) -> int:
    """What a request weighs against its key's limit: a page of a list by the records it asks
    for (``count``, or its default), a page of the changes feed likewise by its entries
    (``limit``), anything else one unit; so does a malformed ``count`` or ``limit``, which is
    answered 400 without reading a record."""
    try:
        if path in PAGED_LISTS:
            return page_cost(params.read_count(query.get("count")))
        if path.startswith(FEED_PATH):
            limit = query.get("limit")
            return page_cost(params.read_int("limit", limit, DEFAULT_LIMIT, 1, MAX_LIMIT))
    except ApiError:
        pass
    return 1


async def count_against_key_limit(request: Request, key: ApiKey) -> None:
    """Count the request against its key's rate limit (once per request, by its cost); 429
    beyond it."""
    cost = request_cost(request.url.path, request.query_params)
    await count_in_scope(request.scope, request.app.state.key_limit, key, cost)


async def count_in_scope(
    scope: MutableMapping[str, Any], limit: RequestLimit, key: ApiKey, cost: int = 1
) -> None:
    """``count_against_key_limit`` for the ASGI ``scope`` of a request of ``cost`` units."""
    if counted_now(scope, limit, key, cost):
        return
    scope[KEY_COUNTED] = True
    wait = await limit.check(key.key_hash, cost)
    if wait is not None:
        raise rate_limited(wait)


def counted_now(
    scope: MutableMapping[str, Any], limit: RequestLimit, key: ApiKey, cost: int = 1
) -> bool:
    """``count_in_scope`` without an await, where it needs none (a limit counted in this
    process's memory): True once the request is counted (429 raised beyond the limit), False
    with nothing counted when ``count_in_scope`` must be awaited instead."""
    if scope.get(KEY_COUNTED):
        return True
    if not limit.in_memory:
        return False
    scope[KEY_COUNTED] = True
    # Counted by the key's hash: the key itself is never kept in memory longer than needed.
    wait = limit.check_now(key.key_hash, cost)
    if wait is not None:
        raise rate_limited(wait)
    return True


async def require_key(request: Request) -> ApiKey:
    """The caller's active key, allowed for this path (by its family's scope, or the scope of
    the stream it draws on) and within its rate limit; 401, 403 or 429 otherwise."""
    key = presented_key(request)
    if key is None:
        raise unauthorized()
    await count_against_key_limit(request, key)
    path = request.url.path
    family = family_of(path)
    if family is not None and not grants(key.scopes, family, path):
        raise ApiError(ErrorCode.FORBIDDEN, lacking(family, path))
    return key


async def require_ops(request: Request) -> None:
    """Open when ``DUCTWORK_SERVE_PUBLIC_DOCS`` is set; otherwise the caller's key must hold the
    ``ops`` scope: 401, 403 or 429 as a Problem (these paths belong to no family)."""
    if request.app.state.config.serve.serve_public_docs:
        return
    key = presented_key(request)
    if key is None:
        raise unauthorized()
    await count_against_key_limit(request, key)
    if OPS_SCOPE not in key.scopes:
        raise ApiError(ErrorCode.FORBIDDEN, f"This key lacks the {OPS_SCOPE!r} scope")


SnapshotDep = Annotated[ServingState, Depends(serving_state)]
ApiKeyDep = Annotated[ApiKey, Depends(require_key)]
