"""The past on the spec's own paths: ``/_ductwork/v1/at/{instant}/<path>`` and, on the spec's
paths themselves, ``Accept-Datetime`` (RFC 7089).

The instant names a publish (``ductwork.history.past``); the request is then answered by the
same routes, short path and envelopes as any other, from that publish's snapshot: the file
itself while the data folder keeps it, or one rebuilt from the current snapshot's history
(once per host and version, under ``snapshots/.past/``). Answers carry ``Memento-Datetime``
(that publish's time), ``X-Snapshot-Version`` and ``Cache-Control: private, immutable``. An
instant before the history kept is a 410 Problem; an instant after the newest publish answers
as now. Errors of the instant itself are Problems, whatever the path's family. An instant after
the newest publish a worker serves first makes it load a newer publish, if the folder has one:
another worker may already have answered from it. The links RFC 7089 adds around them
(original, TimeMap, memento) are ``serve.memento``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timedelta
from email.utils import format_datetime as http_date
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool

from ductwork.contract.encoding import format_datetime
from ductwork.contract.errors import (
    ApiError,
    ErrorCode,
    history_unavailable,
    invalid,
    no_such_path,
    render,
    unauthorized,
)
from ductwork.contract.paths import PIM_IMAGE_SYNC, Family, family_of
from ductwork.history.feed import kept_for
from ductwork.history.feed_entries import Publish
from ductwork.history.past import BadInstant, BeforeHistory, parse_instant, publish_at
from ductwork.keys import ApiKey, grants, lacking
from ductwork.streams.registry import OPEN_PATHS, stream_serving
from serve.deps import count_in_scope, key_of, request_cost
from serve.live_snapshot import PAST_STATE, LiveSnapshot, ServingState
from serve.past_states import RETRY_AFTER_S, PastBusy, PastStates, PastTooLarge
from serve.query_strings import query_pairs

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

AT_PREFIX = "/_ductwork/v1/at/"
CATCH_UP_S = 30.0  # most a request of the past waits for a load of a new publish under way
log = logging.getLogger("ductwork.serve")


class PastRequests:
    """Answers requests for the past from the publish they name; passes every other on.

    Everything that may refuse a request is decided before any past state is loaded: the key
    (401), the path (404), the scope of the spec path asked (403), the instant (400, 410), the
    key's limit for the request with what opening its publish costs the worker (``Weight``:
    429), and whether the worker or the host is busy opening or rebuilding another (503 with
    ``Retry-After``)."""

    def __init__(self, app: ASGIApp, live: LiveSnapshot, past: PastStates) -> None:
        self.app = app
        self.live = live
        self.past = past

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = _asked(scope)
        reading = scope["method"] in ("GET", "HEAD")
        if asked is None or (asked[0] is None and not reading):  # the routes answer it
            await self.app(scope, receive, send)
            return
        inner, instant_text, name = asked
        if not reading:
            refused = ApiError(
                ErrorCode.METHOD_NOT_ALLOWED, "Only GET is supported", headers={"Allow": "GET"}
            )
            await _send_problem(refused, scope["path"], send)
            return
        spec_path = scope["path"] if inner is None else inner
        try:
            current, publish = await self._admitted(scope, spec_path, instant_text, name)
            state = await self._state_of(current, publish)
        except ApiError as error:
            if error.code is ErrorCode.FORBIDDEN:  # the spec path's own refusal, in its style
                await _send_error(error, spec_path, family_of(spec_path), send)
            else:
                await _send_problem(error, scope["path"], send)
            return
        answering = {**scope, PAST_STATE: state}
        if inner is not None:
            answering.update(path=inner, raw_path=quote(inner).encode())
        await self.app(answering, receive, _with_memento(_telling(send, scope, answering), publish))

    async def _admitted(
        self, scope: Scope, spec_path: str, instant_text: str, name: str
    ) -> tuple[ServingState, Publish]:
        """The current state and the publish asked for, once the request may have it: 401
        without an active key (nothing of the past is told to a caller without one), 404 for
        no spec path, 403 without the scope of its family, 400 or 410 for the instant, each
        counted against the key's limit as the request itself (429 first beyond it); then the
        request and what opening its publish costs the worker, counted together (429)."""
        key = _key(scope)
        limit = scope["app"].state.key_limit
        query = dict(query_pairs(scope["query_string"]))
        cost = request_cost(spec_path, query)
        try:
            if scope["path"] == PIM_IMAGE_SYNC:  # it starts a job: it has no past
                raise invalid(name, "The image sync's trigger has no past: send no Accept-Datetime")
            _require_scope(key, spec_path)
            current, publish = await self._publish_for(instant_text, name, spec_path)
        except ApiError:
            await count_in_scope(scope, limit, key, cost)
            raise
        if publish.version != current.version:
            cost += self.past.weight(publish)
        await count_in_scope(scope, limit, key, cost)
        return current, publish

    async def _publish_for(
        self, text: str, name: str, spec_path: str
    ) -> tuple[ServingState, Publish]:
        """The current state and the publish the instant names (400, 410; 503 before the
        first publish). A path of a stream kept shorter than the rest has no past before its
        horizon: 410, as before the whole history."""
        current = self.live.get()
        if current is None:
            raise ApiError(ErrorCode.UNAVAILABLE, "No snapshot has been published yet")
        try:
            instant = _instant(text, name)
            if _after_newest(current, instant) and self.live.publish_pending():
                # Published since this worker last looked: served at once rather than a 400
                # for a version it does not know yet, or the previous snapshot as "now".
                caught_up = await run_in_threadpool(self.live.catch_up, CATCH_UP_S)
                current = caught_up or current
            return current, publish_at(_kept_for_path(current, spec_path), instant)
        except BadInstant as exc:
            raise invalid(name, str(exc)) from None
        except BeforeHistory as gone:
            raise history_unavailable(format_datetime(gone.oldest.published_at)) from None

    async def _state_of(self, current: ServingState, publish: Publish) -> ServingState:
        """The state of ``publish``; 503 while the worker or the host is busy with another."""
        if publish.version == current.version:
            return current
        try:
            return await self.past.get(current, publish)
        except PastBusy as busy:
            raise ApiError(ErrorCode.UNAVAILABLE, str(busy), retry_after=RETRY_AFTER_S) from None
        except PastTooLarge as large:
            message = f"The past at this instant needs more disk than this host keeps ({large})"
            raise ApiError(ErrorCode.UNAVAILABLE, message) from None
        except Exception:
            log.exception("could not open the snapshot of publish %s", publish.version)
            failed = "The past at this instant could not be opened"
            raise ApiError(ErrorCode.UNAVAILABLE, failed, retry_after=RETRY_AFTER_S) from None


def _kept_for_path(state: ServingState, spec_path: str) -> list[Publish]:
    """The publishes whose past ``spec_path`` has: those of its stream's history (every
    publish kept for a path of no stream, or of a stream kept as long as the rest)."""
    stream = stream_serving(spec_path)
    if stream is None:
        return list(state.publishes)
    return kept_for(state.publishes, state.horizons, stream.name)


def _after_newest(state: ServingState, instant: datetime | str) -> bool:
    """Whether ``instant`` (a version or a date-time) is later than the newest publish the
    history of ``state`` holds."""
    if not state.publishes:
        return True
    newest = state.publishes[-1]
    if isinstance(instant, str):
        return instant > newest.version  # versions sort by their publish time
    return instant > newest.published_at


def _key(scope: Scope) -> ApiKey:
    """The active key the request presents; 401 otherwise."""
    authorization = next(
        (value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"),
        "",
    )
    key = key_of(scope["app"].state.keys, authorization)
    if key is None:
        raise unauthorized()
    return key


def _require_scope(key: ApiKey, spec_path: str) -> None:
    """404 unless ``spec_path`` is a spec path the past answers; 403 unless the key holds the
    scope of its family or of its stream (the paths served without a key need none)."""
    family = family_of(spec_path)
    if family is None or spec_path == PIM_IMAGE_SYNC:
        raise no_such_path(spec_path)
    # A spec path served without a key: its past still needs one, but no family's scope.
    if spec_path not in OPEN_PATHS and not grants(key.scopes, family, spec_path):
        raise ApiError(ErrorCode.FORBIDDEN, lacking(family, spec_path))


def _telling(send: Callable, outer: Scope, inner: Scope) -> Callable:
    """``send``, first telling the outer layers what the inner ones learnt of the request: the
    route that answered it, by which the gzip layer keys its answer (``serve.gzip_cache``)."""

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start" and "route" in inner:
            outer["route"] = inner["route"]
        await send(message)

    return sending


def _asked(scope: Scope) -> tuple[str | None, str, str] | None:
    """What a request asks of the past: the spec path (None: the path itself), the instant as
    written, and where it was written; None for a request of the present."""
    path: str = scope["path"]
    if path.startswith(AT_PREFIX):
        instant, _, rest = path[len(AT_PREFIX) :].partition("/")
        return "/" + rest, instant, "instant"
    if family_of(path) is None:
        return None
    for header, value in scope["headers"]:
        if header == b"accept-datetime":
            return None, value.decode("latin-1"), "Accept-Datetime"
    return None


def _instant(text: str, name: str) -> Any:
    if name != "Accept-Datetime":
        return parse_instant(text)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        moment = None
    if moment is None or moment.tzinfo is None:
        raise BadInstant(f"{text[:80]!r} is not an HTTP-date")
    # An HTTP-date names a whole second: the publish current at its end, so that a
    # Memento-Datetime sent back as Accept-Datetime names the same publish again.
    return moment + timedelta(seconds=1) - timedelta(microseconds=1)


def _with_memento(send: Callable, publish: Publish) -> Callable:
    """``send``, adding the past's headers to the response's start (and making it immutable)."""
    added = [
        (b"memento-datetime", http_date(publish.published_at, usegmt=True).encode()),
        (b"x-snapshot-version", publish.version.encode()),
        (b"cache-control", b"private, immutable"),
    ]
    replaced = {name for name, _ in added}

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [h for h in message.get("headers", []) if h[0].lower() not in replaced]
            message = {**message, "headers": [*headers, *added]}
        await send(message)

    return sending


async def _send_problem(error: ApiError, path: str, send: Callable) -> None:
    """The error as a Problem: the past is the mirror's own surface."""
    await _send_error(error, path, None, send)


async def _send_error(error: ApiError, path: str, family: Family | None, send: Callable) -> None:
    """The error in ``family``'s style (a Problem without one)."""
    answer = render(error, family, path)
    headers = [(b"content-type", answer.media_type.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
    headers.append((b"content-length", str(len(answer.body)).encode()))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
