"""Answers built from ready JSON bytes, tagged with the snapshot they came from."""

from __future__ import annotations

from fastapi import Request, Response

from ductwork.contract.errors import JSON, ApiError, ErrorAnswer, render
from ductwork.contract.paths import family_of
from serve.live_snapshot import ServingState


def json_answer(request: Request, state: ServingState, body: bytes) -> Response:
    """200 with ``body``, or 304 when the caller already holds this snapshot's answer."""
    headers = {
        "ETag": state.etag,
        "X-Snapshot-Version": state.version,
        # Keyed data: only the caller may keep it, and must revalidate (cheaply, by ETag).
        "Cache-Control": "private, no-cache",
    }
    if request.headers.get("if-none-match") == state.etag:
        return Response(status_code=304, headers=headers)
    return Response(content=body, media_type=JSON, headers=headers)


def error_response(error: ApiError, path: str) -> Response:
    """An error in the style of the path's family."""
    answer: ErrorAnswer = render(error, family_of(path), path)
    return Response(
        content=answer.body,
        status_code=answer.status,
        media_type=answer.media_type,
        headers=answer.headers,
    )
