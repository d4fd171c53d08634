"""What the mirror can be asked of the past: a spec path's TimeMap (RFC 7089), and the publishes
its history keeps, on the mirror's own surface ``/_ductwork/v1``.

Both read the served snapshot's history. A TimeMap needs what its spec path needs: a key (the
past is told to none without one) holding the scope of the path's family or of its stream, any
key for a path the spec serves without one. The publishes need a key, and show each publish's
changes only for the streams the key's scopes cover (by family or by stream). Errors are
Problems.

Neither answer carries ``X-Snapshot-Version``: the gzip layer keeps a compressed answer so
tagged by its route's parameters, and these vary by what the route does not read as one (the
spec path's query, the key's scopes).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as PathParameter
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match

from ductwork.contract.encoding import dumps, format_datetime
from ductwork.contract.errors import JSON, ApiError, ErrorCode, no_such_path, not_found
from ductwork.contract.paths import family_of
from ductwork.keys import SCOPE_OF, ApiKey, grants, lacking, stream_scope
from ductwork.streams.registry import OPEN_PATHS, STREAMS, stream_serving
from serve import memento
from serve import openapi_schemas as schemas
from serve.deps import require_key, serving_state
from serve.live_snapshot import ServingState
from serve.openapi_docs import MIRROR_ERRORS, answer
from serve.validators import content_etag, names_body

PREFIX = "/_ductwork/v1"
router = APIRouter(prefix=PREFIX, tags=["mirror"], responses=MIRROR_ERRORS)
# The paths the spec serves without a key: their TimeMaps take any key.
TIMEMAP_ANSWER = {
    200: {
        "description": "The spec path's TimeMap: the original (its own TimeGate), then one "
        "memento per publish kept, oldest first.",
        "content": {
            memento.LINK_FORMAT: {"schema": {"type": "string"}},
            JSON: {"schema": schemas.TIMEMAP},
        },
    }
}


@router.get(
    "/timemap/{path:path}",
    summary="The TimeMap of a spec path: every memento of it the history keeps",
    description=(
        "`path` is a spec GET path with its query. The answer lists the original resource "
        "(which is also its TimeGate: `Accept-Datetime` on it), the TimeMap itself with the span "
        "it covers (`from`, `until`), and one memento per publish kept, "
        "`/_ductwork/v1/at/{version}/<path>` with its `datetime` (RFC 7089 section 5.1), in "
        "`application/link-format`, or as JSON with `Accept: application/json`. A key needs the "
        "path's own scope (any key for a path served without one); an unknown path is a 404."
    ),
    responses=TIMEMAP_ANSWER,
)
async def timemap(
    request: Request,
    path: Annotated[str, PathParameter(description="A spec GET path, without its first /.")],
    key: Annotated[ApiKey, Depends(require_key)],
) -> Response:
    spec_path = "/" + path
    if not memento.has_past(spec_path) or not _routed(request, spec_path):
        raise no_such_path(spec_path)
    family = family_of(spec_path)
    if (
        family is not None
        and spec_path not in OPEN_PATHS
        and not grants(key.scopes, family, spec_path)
    ):
        raise ApiError(ErrorCode.FORBIDDEN, lacking(family, spec_path))
    state = await serving_state(request)
    if not state.publishes:
        raise not_found("The history keeps no publish yet")
    raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
    target = memento.request_target(
        raw[len(memento.TIMEMAP_PREFIX) :], request.scope.get("query_string", b"")
    )
    kept = request.app.state.kept_publishes.of(state)
    kept = kept[_before_horizon(state, spec_path) :]
    if JSON in request.headers.get("accept", ""):
        body, media_type = memento.timemap_json(target, kept), JSON
    else:
        body, media_type = memento.timemap_links(target, kept), memento.LINK_FORMAT
    return _answer(request, body, media_type, vary="Accept")


def _before_horizon(state: ServingState, spec_path: str) -> int:
    """How many of the publishes kept lie before the horizon of the stream ``spec_path`` is
    of (one kept shorter than the rest): the past answers 410 there, so the TimeMap leaves them
    out."""
    stream = stream_serving(spec_path)
    horizon = None if stream is None else state.horizons.get(stream.name)
    if horizon is None:
        return 0
    return sum(1 for publish in state.publishes if publish.seq < horizon)


@router.get(
    "/publishes",
    summary="The publishes the history keeps, with what each changed per stream",
    description=(
        "Oldest first: each publish's snapshot `version`, `publishedAt`, and `changes`: per "
        "stream it changed, how many records it added or changed (`upsert`) and removed "
        "(`delete`), for the streams the key's scopes cover, by family or by stream (others "
        "are left out, as are streams it did not change). `changes` is null for the oldest publish "
        "kept, whose changes are no longer kept. Any of them can be asked for at "
        "`/_ductwork/v1/at/{version}/<path>`."
    ),
    responses=answer(schemas.PUBLISHES),
)
async def publishes(request: Request, key: Annotated[ApiKey, Depends(require_key)]) -> Response:
    state = await serving_state(request)
    counts = await run_in_threadpool(request.app.state.kept_publishes.counts, state)
    readable = {
        stream.name
        for stream in STREAMS
        if SCOPE_OF[stream.family] in key.scopes or stream_scope(stream.name) in key.scopes
    }
    listed: list[dict[str, Any]] = []
    for index, publish in enumerate(state.publishes):
        changed = counts.get(publish.seq, {})
        listed.append(
            {
                "version": publish.version,
                "publishedAt": format_datetime(publish.published_at),
                "changes": None
                if index == 0
                else {
                    stream: {"upsert": count.upsert, "delete": count.delete}
                    for stream, count in changed.items()
                    if stream in readable
                },
            }
        )
    body = dumps({"snapshot": state.version, "publishes": listed})
    return _answer(request, body, JSON)


def _routed(request: Request, path: str) -> bool:
    """Whether a route of the app answers a GET of ``path``."""
    probe = {"type": "http", "path": path, "root_path": "", "method": "GET"}
    return any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes)


def _answer(request: Request, body: bytes, media_type: str, vary: str | None = None) -> Response:
    """200 with ``body``, tagged by its content (304 to an ``If-None-Match`` that names it);
    only the caller may keep it, revalidating."""
    etag = content_etag(body)
    headers = {"ETag": etag.decode(), "Cache-Control": "private, no-cache"}
    if vary is not None:
        headers["Vary"] = vary
    if names_body(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(content=body, media_type=media_type, headers=headers)
