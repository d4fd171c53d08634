"""The route of a document stream (``Serving.DOCUMENT``): one GET on the stream's path answering
the body its snapshot holds (503 before the stream's first sync).

A stream the spec declares open (no ``Authorization``) is served without a key, within a
limit of calls per client address per second (``DUCTWORK_SERVE_KEYLESS_REQUESTS_PER_SECOND``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Depends, Request, Response

from ductwork.contract.errors import ApiError, ErrorCode, rate_limited
from ductwork.streams.model import Stream
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep, require_key
from serve.openapi_docs import answer, record_of
from serve.rate_limit import client_of
from serve.responses import json_answer

Handler = Callable[[Request, SnapshotDep], Awaitable[Response]]


def document_handler(stream: Stream) -> Handler:
    """The handler of one document stream."""

    async def answer(request: Request, state: SnapshotDep) -> Response:
        if stream.open_access:
            client = client_of(request.client.host if request.client else "unknown")
            wait = await request.app.state.keyless_limit.check(client)
            if wait is not None:
                raise rate_limited(wait)
        body = state.small.documents.get(stream.name)
        if body is None:
            raise ApiError(
                ErrorCode.UNAVAILABLE, f"The {stream.name} stream has not been synced yet"
            )
        return json_answer(request, state, body)

    return answer


def add_routes(stream: Stream, router: APIRouter) -> None:
    """Add the route of ``stream``, a document stream, to its family's ``router``."""
    router.add_api_route(
        stream.path.removeprefix(router.prefix),
        document_handler(stream),
        methods=["GET"],
        name=stream.sql,
        summary=stream.description + ("" if not stream.open_access else " (no key)"),
        dependencies=[] if stream.open_access else [Depends(require_key)],
        responses=answer(schemas.document(record_of(stream), stream.records_in_text)),
    )
