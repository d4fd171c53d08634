"""Answers built from ready JSON bytes, tagged with the snapshot they came from."""

from __future__ import annotations

from functools import lru_cache

from fastapi import Request, Response

from ductwork.contract.errors import JSON, ApiError, ErrorAnswer, render
from ductwork.contract.paths import family_of
from serve.live_snapshot import ServingState


@lru_cache(maxsize=4)
def _snapshot_headers(etag: str, version: str) -> tuple[tuple[bytes, bytes], ...]:
    """Every answer's headers naming its snapshot, encoded once per snapshot."""
    return (
        (b"etag", etag.encode()),
        (b"x-snapshot-version", version.encode()),
        # Keyed data: only the caller may keep it, and must revalidate (cheaply, by ETag).
        (b"cache-control", b"private, no-cache"),
    )


class _ReadyJson(Response):
    """A 200 JSON answer whose header lines are ready-made: ``Response.__init__`` builds and
    encodes them on every request, at many times the cost of the lookup itself. The lines and
    their order are the ones it would build."""

    media_type = JSON

    def __init__(self, body: bytes, snapshot_headers: tuple[tuple[bytes, bytes], ...]) -> None:
        self.status_code = 200
        self.body = body
        self.background = None
        self.raw_headers = [
            *snapshot_headers,
            (b"content-length", str(len(body)).encode()),
            (b"content-type", JSON.encode()),
        ]


def json_answer(request: Request, state: ServingState, body: bytes) -> Response:
    """200 with ``body``, or 304 when the caller already holds this snapshot's answer."""
    if holds_current(state, request.headers.get("if-none-match")):
        return not_modified(state)
    return ready_json(state, body)


def holds_current(state: ServingState, if_none_match: str | None) -> bool:
    """Whether an ``If-None-Match`` value names this snapshot's answer (then: 304)."""
    return if_none_match == state.etag


def not_modified(state: ServingState) -> Response:
    """The 304 of every answer of this snapshot."""
    answer = Response(status_code=304)
    answer.raw_headers[:0] = _snapshot_headers(state.etag, state.version)
    return answer


def tagged(state: ServingState, body: bytes, media_type: str) -> Response:
    """200 with ``body`` of ``media_type``, tagged with its snapshot."""
    answer = Response(content=body, media_type=media_type)
    answer.raw_headers[:0] = _snapshot_headers(state.etag, state.version)
    return answer


def ready_json(state: ServingState, body: bytes) -> Response:
    """200 with ``body``, tagged with its snapshot."""
    return _ReadyJson(body, _snapshot_headers(state.etag, state.version))


def error_response(error: ApiError, path: str) -> Response:
    """An error in the style of the path's family."""
    answer: ErrorAnswer = render(error, family_of(path), path)
    return Response(
        content=answer.body,
        status_code=answer.status,
        media_type=answer.media_type,
        headers=answer.headers,
    )
