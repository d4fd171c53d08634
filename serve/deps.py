"""Request dependencies of the read API, as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ductwork.contract.errors import ApiError, ErrorCode, rate_limited, unauthorized
from ductwork.contract.paths import family_of
from ductwork.keys import SCOPE_OF, ApiKey
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


async def require_key(request: Request) -> ApiKey:
    """The caller's active key, allowed for this path's family and within its rate limit;
    401, 403 or 429 otherwise."""
    key = presented_key(request)
    if key is None:
        raise unauthorized()
    # Counted by the key's hash: the key itself is never kept in memory longer than needed.
    wait = request.app.state.key_limit.check(key.key_hash)
    if wait is not None:
        raise rate_limited(wait)
    family = family_of(request.url.path)
    if family is not None and SCOPE_OF[family] not in key.scopes:
        raise ApiError(ErrorCode.FORBIDDEN, f"This key lacks the {SCOPE_OF[family]!r} scope")
    return key


SnapshotDep = Annotated[ServingState, Depends(serving_state)]
ApiKeyDep = Annotated[ApiKey, Depends(require_key)]
