"""Answers built from ready JSON bytes, tagged with their content (ETag) and the snapshot they
came from."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from fastapi import Request, Response

from ductwork.contract.errors import JSON, ApiError, ErrorAnswer, render
from ductwork.contract.paths import family_of
from serve.gzip_cache import GZIP_MINIMUM_BYTES
from serve.live_snapshot import ServingState
from serve.pieced_body import PiecedBody
from serve.validators import content_etag, names_body, unmodified_since, with_gzip

# When a record's content was first served: epoch seconds, and as an HTTP date.
Modified = tuple[float, bytes]


class Conditions(NamedTuple):
    """What a request says about the answer it may already hold and the forms it takes (the
    first of each header)."""

    if_none_match: str | None
    if_modified_since: str | None
    accept_encoding: str | None
    accept: str | None = None

    @classmethod
    def of(cls, request: Request) -> Conditions:
        headers = request.headers
        return cls(
            headers.get("if-none-match"),
            headers.get("if-modified-since"),
            headers.get("accept-encoding"),
            headers.get("accept"),
        )


@lru_cache(maxsize=4)
def _snapshot_headers(version: str) -> tuple[tuple[bytes, bytes], ...]:
    """The headers naming an answer's snapshot, encoded once per snapshot."""
    return (
        (b"x-snapshot-version", version.encode()),
        # Keyed data: only the caller may keep it, and must revalidate (cheaply, by ETag).
        (b"cache-control", b"private, no-cache"),
    )


def _tagged_lines(
    etag: bytes, version: str, length: int, media_type: str
) -> list[tuple[bytes, bytes]]:
    """The header lines of a 200 tagged with its content and snapshot, in the order
    ``tagged_answer``'s ``Response`` gives them."""
    return [
        (b"etag", etag),
        *_snapshot_headers(version),
        (b"content-length", str(length).encode()),
        (b"content-type", media_type.encode()),
    ]


class _ReadyJson(Response):
    """A 200 JSON answer whose header lines are ready-made: ``Response.__init__`` builds and
    encodes them on every request, at many times the cost of the lookup itself. The lines and
    their order are the ones it would build."""

    media_type = JSON

    def __init__(
        self, body: bytes, etag: bytes, version: str, modified: Modified | None = None
    ) -> None:
        self.status_code = 200
        self.body = body
        self.background = None
        self.raw_headers = _tagged_lines(etag, version, len(body), JSON)
        if modified is not None:
            self.raw_headers.append((b"last-modified", modified[1]))


def json_answer(
    request: Request, state: ServingState, body: bytes, modified: Modified | None = None
) -> Response:
    """200 with ``body``, or 304 when the caller already holds this body."""
    return revalidated(state, body, Conditions.of(request), modified)


def revalidated(
    state: ServingState,
    body: bytes,
    conditions: Conditions,
    modified: Modified | None = None,
    etag: bytes | None = None,
) -> Response:
    """200 with ``body`` (and ``Last-Modified`` when ``modified`` is known), or its 304 when
    ``If-None-Match`` names it (in any snapshot), or, without ``If-None-Match``, when it has
    not been modified since ``If-Modified-Since`` (RFC 9110, 13.2.2). ``etag``: the body's
    ``content_etag``, when known already."""
    if etag is None:
        etag = content_etag(body)
    if conditions.if_none_match is not None:
        held = names_body(conditions.if_none_match, etag)
    else:
        held = modified is not None and unmodified_since(modified[0], conditions.if_modified_since)
    if held:
        return not_modified(state, _as_sent(etag, body, conditions.accept_encoding))
    return _ReadyJson(body, etag, state.version, modified)


def _as_sent(etag: bytes, body: bytes | PiecedBody, accept_encoding: str | None) -> bytes:
    """The ETag the 200 would have carried: the gzip layer compresses a body this large for a
    caller that accepts gzip."""
    if accept_encoding and "gzip" in accept_encoding and len(body) >= GZIP_MINIMUM_BYTES:
        return with_gzip(etag)
    return etag


def not_modified(state: ServingState, etag: bytes) -> Response:
    """The 304 of an answer whose ETag is ``etag``."""
    answer = Response(status_code=304)
    answer.raw_headers[:0] = [(b"etag", etag), *_snapshot_headers(state.version)]
    return answer


def tagged(request: Request, state: ServingState, body: bytes, media_type: str) -> Response:
    """200 with ``body`` of ``media_type``, tagged with its content and snapshot, or its 304
    when ``If-None-Match`` names it (in any snapshot)."""
    return tagged_answer(state, body, media_type, Conditions.of(request))


def tagged_answer(
    state: ServingState, body: bytes, media_type: str, conditions: Conditions
) -> Response:
    """``tagged`` for a request whose ``conditions`` are read already."""
    etag = content_etag(body)
    if names_body(conditions.if_none_match, etag):
        return not_modified(state, _as_sent(etag, body, conditions.accept_encoding))
    answer = Response(content=body, media_type=media_type)
    answer.raw_headers[:0] = [(b"etag", etag), *_snapshot_headers(state.version)]
    return answer


def tagged_pieces(
    state: ServingState, body: PiecedBody, media_type: str, conditions: Conditions
) -> Response:
    """``tagged_answer`` for a body held in pieces, which it joins only if it is read."""
    etag = body.etag()
    if names_body(conditions.if_none_match, etag):
        return not_modified(state, _as_sent(etag, body, conditions.accept_encoding))
    return JoinedWhenRead(body, etag, state.version, media_type)


class JoinedWhenRead(Response):
    """A 200 whose body is held in pieces (``pieces``), joined when ``body`` is read; its
    header lines are the ones ``tagged_answer`` would give it, in their order."""

    def __init__(self, body: PiecedBody, etag: bytes, version: str, media_type: str) -> None:
        self.status_code = 200
        self.pieces = body
        self.background = None
        self.raw_headers = _tagged_lines(etag, version, len(body), media_type)

    @property  # type: ignore[override]
    def body(self) -> bytes:
        return self.pieces.joined()


def unjoined_body(answer: Response) -> bytes | PiecedBody:
    """An answer's body, in pieces when it holds them."""
    return answer.pieces if isinstance(answer, JoinedWhenRead) else answer.body


def error_response(error: ApiError, path: str) -> Response:
    """An error in the style of the path's family."""
    answer: ErrorAnswer = render(error, family_of(path), path)
    return Response(
        content=answer.body,
        status_code=answer.status,
        media_type=answer.media_type,
        headers=answer.headers,
    )
