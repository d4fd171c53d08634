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
another worker may already have answered from it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timedelta
from email.utils import format_datetime as http_date
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool

from ductwork import file_modes, snapshot_guard, snapshots
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
from ductwork.contract.paths import PIM_IMAGE_SYNC, family_of
from ductwork.history.feed import Publish
from ductwork.history.past import BadInstant, BeforeHistory, parse_instant, publish_at, rebuild
from serve.deps import key_of
from serve.live_snapshot import PAST_STATE, LiveSnapshot, ServingState, load_state
from serve.stream_index import CACHE_BYTES

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

AT_PREFIX = "/_ductwork/v1/at/"
PAST_FOLDER = ".past"
KEEP_REBUILT = 4  # rebuilt snapshots kept per host, the least recently made dropped first
CATCH_UP_S = 30.0  # most a request of the past waits for a load of a new publish under way
log = logging.getLogger("ductwork.serve")


class PastStates:
    """The serving states of past publishes, a few per worker, least recently used dropped."""

    def __init__(self, snapshots_dir: Path, cache_bytes: int = CACHE_BYTES, keep: int = 2) -> None:
        self._dir = snapshots_dir
        self._cache_bytes = cache_bytes
        self._keep = keep
        self._states: OrderedDict[str, ServingState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, current: ServingState, publish: Publish) -> ServingState:
        """The state of ``publish`` (a blocking call: loading may rebuild a snapshot)."""
        with self._lock:
            found = self._states.get(publish.version)
            if found is not None:
                self._states.move_to_end(publish.version)
                return found
            state = self._load(current, publish)
            self._states[publish.version] = state
            while len(self._states) > self._keep:
                _, dropped = self._states.popitem(last=False)
                dropped.lease.release()  # answers under way finish on its open connection
            return state

    def _load(self, current: ServingState, publish: Publish) -> ServingState:
        kept = self._dir / f"{snapshots.PREFIX}{publish.version}{snapshots.SUFFIX}"
        if kept.exists():
            return load_state(snapshots.Snapshot(publish.version, kept), self._cache_bytes)
        rebuilt = self._rebuilt(current, publish)
        return load_state(
            snapshots.Snapshot(publish.version, rebuilt), self._cache_bytes, with_history=False
        )

    def _rebuilt(self, current: ServingState, publish: Publish) -> Path:
        """The rebuilt snapshot of ``publish``: made by the first worker of the host that needs
        it, under a lock, while the others wait and then open it."""
        folder = self._dir / PAST_FOLDER
        modes = file_modes.current()
        modes.make_private_dir(folder)
        target = folder / f"past-{publish.version}{snapshots.SUFFIX}"
        lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, modes.file_mode)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                staging = folder / f".staging-{publish.version}{snapshots.SUFFIX}"
                staging.unlink(missing_ok=True)
                rebuild(current.path, publish, staging)
                modes.secure(staging)
                snapshot_guard.write_checksum(staging, beside=target)
                os.replace(staging, target)
                _drop_oldest(folder, KEEP_REBUILT)
        finally:
            os.close(lock)
        return target


def _drop_oldest(folder: Path, keep: int) -> None:
    """Keep the ``keep`` most recently made rebuilt snapshots (and their record files); a file
    still mapped or open elsewhere stays readable there."""
    made = sorted(folder.glob(f"past-*{snapshots.SUFFIX}"), key=lambda p: p.stat().st_mtime)
    for old in made[:-keep]:
        old.unlink(missing_ok=True)
        snapshot_guard.checksum_path(old).unlink(missing_ok=True)


class PastRequests:
    """Answers requests for the past from the publish they name; passes every other on."""

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
        try:
            _require_a_key(scope)
            state, publish = await self._state_for(instant_text, name)
        except ApiError as error:
            await _send_problem(error, scope["path"], send)
            return
        if inner is not None:
            if family_of(inner) is None or inner == PIM_IMAGE_SYNC:
                await _send_problem(no_such_path(inner), scope["path"], send)
                return
            scope = {**scope, "path": inner, "raw_path": quote(inner).encode()}
        scope = {**scope, PAST_STATE: state}
        await self.app(scope, receive, _with_memento(send, publish))

    async def _state_for(self, text: str, name: str) -> tuple[ServingState, Publish]:
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
            publish = publish_at(list(current.publishes), instant)
        except BadInstant as exc:
            raise invalid(name, str(exc)) from None
        except BeforeHistory as gone:
            raise history_unavailable(format_datetime(gone.oldest.published_at)) from None
        if publish.version == current.version:
            return current, publish
        state = await run_in_threadpool(self.past.get, current, publish)
        return state, publish


def _after_newest(state: ServingState, instant: datetime | str) -> bool:
    """Whether ``instant`` (a version or a date-time) is later than the newest publish the
    history of ``state`` holds."""
    if not state.publishes:
        return True
    newest = state.publishes[-1]
    if isinstance(instant, str):
        return instant > newest.version  # versions sort by their publish time
    return instant > newest.published_at


def _require_a_key(scope: Scope) -> None:
    """401 unless the request presents an active key: nothing of the past is told to a caller
    without one (the route that answers then checks the key's scope and its limit)."""
    authorization = next(
        (value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"),
        "",
    )
    if key_of(scope["app"].state.keys, authorization) is None:
        raise unauthorized()


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
    answer = render(error, None, path)
    headers = [(b"content-type", answer.media_type.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
    headers.append((b"content-length", str(len(answer.body)).encode()))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
