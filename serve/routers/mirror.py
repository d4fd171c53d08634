"""The mirror's own surface, ``/_ductwork/v1``: the changes feed of every stream.

Errors are Problems (RFC 9457), whatever the stream's family: 400 for a bad parameter or a
token this mirror did not issue, 404 for an unknown stream, 410 for history no longer kept.
A key needs the scope of the stream's family, or the stream's own (``stream:<name>``).
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ductwork.contract.encoding import dumps, format_datetime
from ductwork.contract.errors import (
    ApiError,
    ErrorCode,
    history_unavailable,
    invalid,
    not_found,
)
from ductwork.contract.params import read_int
from ductwork.history import feed, feed_entries
from ductwork.history.change_files import ChangeSlice
from ductwork.keys import ApiKey, grants, lacking
from ductwork.streams.model import Stream
from ductwork.streams.registry import STREAMS
from serve import openapi_schemas as schemas
from serve.deps import require_key, serving_state
from serve.gzip_cache import AnswerCache, AnswerKey
from serve.live_snapshot import ServingState
from serve.long_polls import LongPolls
from serve.openapi_docs import MIRROR_ERRORS, answer
from serve.pieced_body import PiecedBody
from serve.responses import tagged

PREFIX = "/_ductwork/v1"
NDJSON = "application/x-ndjson"
JSON = "application/json"
MAX_WAIT_S = 60
CHANGES_MEMBER = b',"changes":['  # what a JSON page's entries follow
router = APIRouter(prefix=PREFIX, tags=["mirror"], responses=MIRROR_ERRORS)
# The streams by name, for the busiest paths (``serve.fast_answers`` looks them up too).
STREAM_NAMES = {stream.name: stream for stream in STREAMS}


def stream_or_404(name: str) -> Stream:
    """The stream of that name; 404 (a Problem) otherwise."""
    found = STREAM_NAMES.get(name)
    if found is None:
        raise not_found(f"No stream {name[:80]!r}")
    return found


def require_scope(key: ApiKey, stream: Stream) -> None:
    """403 unless the key holds the scope of the stream's family or the stream's own: the
    scopes that grant the stream's path."""
    if not grants(key.scopes, stream.family, stream.path):
        raise ApiError(ErrorCode.FORBIDDEN, lacking(stream.family, stream.path))


@router.get(
    "/changes/{stream}",
    summary="What changed in a stream: every record at first, then net changes since a token",
    description=(
        "Without `since`: every current record as an `upsert`, then `next`. With `since`: "
        "the net change of every key since the token's snapshot, each key once in its final "
        "state. While `hasMore`, `next` continues the same walk, pinned to the snapshot of its "
        "first page; entries are ordered by (`version`, `key`). `wait` (seconds, 0 to 60) holds "
        "an answer with nothing new until a newer snapshot is published (a worker holds a "
        "bounded number of such requests, in all and per key; beyond, it answers at once). "
        "`Accept: application/x-ndjson` gives one JSON object per line, `next` and `hasMore` "
        "last. A token older than the history kept is a 410 naming the oldest instant kept."
    ),
    responses=answer(schemas.CHANGES),
)
async def changes(
    request: Request,
    stream: str,
    key: Annotated[ApiKey, Depends(require_key)],
    since: Annotated[str | None, Query(description="A token from an earlier answer.")] = None,
    limit: Annotated[str | None, Query(description="Changes per page, 1 to 10000.")] = None,
    wait: Annotated[str | None, Query(description="Seconds to hold, 0 to 60.")] = None,
) -> Response:
    found = stream_or_404(stream)
    require_scope(key, found)
    size = read_int("limit", limit, feed.DEFAULT_LIMIT, 1, feed.MAX_LIMIT)
    hold_s = read_int("wait", wait, 0, 0, MAX_WAIT_S)
    media_type = NDJSON if NDJSON in request.headers.get("accept", "") else JSON
    state = await serving_state(request)
    pages: AnswerCache = request.app.state.feed_pages
    kept = pages.get(_page_key(state, request.url.path, since, size, media_type))
    if kept is not None:  # only pages with changes are kept: no reason to wait
        return tagged(request, state, kept, media_type)
    page = await _page(state, found, since, size)
    if hold_s and not page.changes and not page.has_more:
        polls: LongPolls = request.app.state.long_polls
        newer = None
        with polls.slot(key.key_hash) as may_wait:
            if may_wait:  # past the worker's or the key's cap: answered now, as without wait
                newer = await request.app.state.live.wait_for_newer(state.version, hold_s)
        if newer is not None:
            state = newer
            page = await _page(newer, found, since, size)
    body = _ndjson(page) if media_type == NDJSON else _json(found.name, since, page)
    if _worth_keeping(page, media_type):
        pages.put(_page_key(state, request.url.path, since, size, media_type), body)
    return tagged(request, state, body, media_type)


def _worth_keeping(page: feed.FeedPage, media_type: str) -> bool:
    """Whether a page's body is kept for its next requests: one with changes, but a JSON page
    sliced from a change file. That one is sliced again in less time than keeping a copy
    costs: a kept copy takes memory the worker has not touched yet, a page fault every 4 KiB,
    while the slice's pieces lie in the mapped file (``serve.pieced_body``)."""
    if not page.changes:
        return False
    return media_type != JSON or not isinstance(page.changes, ChangeSlice)


def sliced_json_page(
    state: ServingState, pages: AnswerCache, path: str, stream: Stream, since: str, size: int
) -> PiecedBody | None:
    """A page of ``stream``'s walk since the token ``since`` when it needs no read of the
    snapshot: kept from an earlier request, or sliced from a change file (in pieces, with a
    way to its gzip form from the file's compressed chunks); None when the snapshot must be
    read. ApiError as the route answers a bad token (400) or history no longer kept (410).
    For the short path, which runs no route."""
    key = _page_key(state, path, since, size, JSON)
    kept = pages.get(key)
    if kept is not None:
        return PiecedBody((kept,))
    page = _sliced(state, stream, _position(state, stream, since), size)
    if page is None:
        return None
    pieces = _json_pieces(stream.name, since, page)
    if not _worth_keeping(page, JSON):
        if isinstance(page.changes, ChangeSlice) and page.changes:
            return PiecedBody(pieces, partial(page.changes.gzip_of, pieces, len(pieces[0])))
        return PiecedBody(pieces)
    body = b"".join(pieces)
    pages.put(key, body)
    return PiecedBody((body,))


def _page_key(
    state: ServingState, path: str, since: str | None, size: int, media_type: str
) -> AnswerKey:
    """A page's key among the kept pages: the same snapshot, stream, token, size and format
    give the same bytes (the walk a token continues is pinned to one publish)."""
    parameters = (("limit", str(size)), ("since", since or ""))
    return (state.version.encode(), path, parameters, media_type.encode())


async def _page(state: ServingState, stream: Stream, since: str | None, size: int) -> feed.FeedPage:
    """One page of the walk: sliced from a change file at once when it can be (a fraction of
    a millisecond: handing it to a worker thread cost more), otherwise read in a worker thread
    from ``state``'s snapshot."""
    position = _position(state, stream, since)
    sliced = _sliced(state, stream, position, size)
    if sliced is not None:
        return sliced
    known = _known(state, stream)

    def read() -> feed.FeedPage:
        con = state.reader.cursor()
        try:
            listing = state.lists.get(stream.name) if stream.feed_key_column else None
            return feed.read_page(
                con, stream.name, stream.sql, position, size, known, state.walks, listing
            )
        except feed.HistoryGone as gone:
            raise history_unavailable(format_datetime(gone.oldest)) from None

    return await run_in_threadpool(read)


def _known(state: ServingState, stream: Stream) -> tuple[list[feed_entries.Publish], str]:
    """The publishes the stream's history keeps in ``state``, and the mirror's name."""
    return feed.kept_for(state.publishes, state.horizons, stream.name), state.mirror


def _sliced(
    state: ServingState, stream: Stream, position: feed.Position, size: int
) -> feed.FeedPage | None:
    """The page at ``position`` when it needs no read of the snapshot (``feed.sliced_page``);
    410 when the history it needs is no longer kept."""
    try:
        return feed.sliced_page(
            stream.name, position, size, _known(state, stream), state.change_files
        )
    except feed.HistoryGone as gone:
        raise history_unavailable(format_datetime(gone.oldest)) from None


def _position(state: ServingState, stream: Stream, since: str | None) -> feed.Position:
    """Where the walk stands: the initial load without ``since``, else the token's position;
    400 for a token this mirror did not issue or another stream's."""
    if since is None:
        return feed.Position(stream.name, None)
    try:
        position = feed.decode_token(since, state.mirror)
    except feed.InvalidToken as exc:
        raise invalid("since", f"since is not a token of this mirror ({exc})") from None
    if position.stream != stream.name:
        raise invalid("since", "since is a token of another stream")
    return position


def _json(stream: str, since: str | None, page: feed.FeedPage) -> bytes:
    return b"".join(_json_pieces(stream, since, page))  # one copy


def _json_pieces(
    stream: str, since: str | None, page: feed.FeedPage
) -> tuple[bytes, bytes | memoryview, bytes]:
    """A JSON page as three pieces: its members up to the changes' opening bracket, the
    changes' entries (as a change file maps them, for a page sliced from one), and the end."""
    head = dumps(
        {
            "stream": stream,
            "since": since,
            "next": page.next_token,
            "hasMore": page.has_more,
            "snapshot": page.pinned.version,
        }
    )
    return head[:-1] + CHANGES_MEMBER, page.entries(b","), b"]}"


def _ndjson(page: feed.FeedPage) -> bytes:
    last = dumps({"next": page.next_token, "hasMore": page.has_more})
    if not page.changes:
        return last + b"\n"
    return b"".join((page.entries(b"\n"), b"\n", last, b"\n"))
