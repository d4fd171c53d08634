"""Request dependencies of the read API, as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ductwork.contract.errors import ApiError, ErrorCode, rate_limited, unauthorized
from ductwork.contract.paths import family_of
from ductwork.keys import OPS_SCOPE, SCOPE_OF, ApiKey
from serve.live_snapshot import ServingState


# Both are ``async``: they do no blocking work, and a plain ``def`` dependency costs a trip
# through the thread pool on every request.
async def serving_state(request: Request) -> ServingState:
    """The snapshot this request is answered from; 503 before the first publish."""
    state = request.app.state.live.get()
    if state is None:
        raise ApiError(ErrorCode.UNAVAILABLE, "No snapshot has been published yet")
    return state


def presented_key(request: Request) -> ApiKey | None:
    """The active key the request presents as ``Authorization: Bearer KEY``, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return request.app.state.keys.verify(token.strip())


# Set in the ASGI scope once a request has been counted against its key's limit, so that a
# request the short path counted and then handed to the routes is not counted twice.
KEY_COUNTED = "ductwork.key_counted"


async def count_against_key_limit(request: Request, key: ApiKey) -> None:
    """Count the request against its key's rate limit (once per request); 429 beyond it."""
    if request.scope.get(KEY_COUNTED):
        return
    request.scope[KEY_COUNTED] = True
    # Counted by the key's hash: the key itself is never kept in memory longer than needed.
    wait = await request.app.state.key_limit.check(key.key_hash)
    if wait is not None:
        raise rate_limited(wait)


async def require_key(request: Request) -> ApiKey:
    """The caller's active key, allowed for this path's family and within its rate limit;
    401, 403 or 429 otherwise."""
    key = presented_key(request)
    if key is None:
        raise unauthorized()
    await count_against_key_limit(request, key)
    family = family_of(request.url.path)
    if family is not None and SCOPE_OF[family] not in key.scopes:
        raise ApiError(ErrorCode.FORBIDDEN, f"This key lacks the {SCOPE_OF[family]!r} scope")
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
