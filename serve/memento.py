"""The past as RFC 7089 (Memento) describes it: the links between a spec path, its mementos and
its TimeMap.

- A spec path is its own TimeGate (URI-R = URI-G, 200-style negotiation): every answer of one
  to a GET or HEAD varies by ``Accept-Datetime`` (merged into any ``Vary`` already there, such
  as the gzip layer's ``Accept-Encoding``), so that no cache replays a memento for the present
  or the present for a memento.
- A memento is ``/_ductwork/v1/at/{version}/<spec path with its query>``: one snapshot's answer
  at a URI of its own. Every answer from the past (``serve.past`` marks it with
  ``Memento-Datetime``) links the original, the TimeMap and the memento itself with its
  datetime, and names the memento in ``Content-Location`` when it was asked for by another URI
  (``Accept-Datetime``, or ``/at/`` with a date-time).
- Every answer of the present on a spec path links it as original and TimeGate, and its TimeMap.
- The TimeMap, ``/_ductwork/v1/timemap/<spec path with its query>``, lists one memento per
  publish the history keeps (``serve.routers.timemaps``), in ``application/link-format``
  (RFC 7089 section 5.1) or JSON.

Links are relative, as the service's own are: they resolve against whichever host serves them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from email.utils import format_datetime as http_date
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import quote_from_bytes

from ductwork.contract.encoding import dumps, format_datetime
from ductwork.contract.paths import PIM_IMAGE_SYNC, family_of
from ductwork.history.publish_counts import Counts, changes_per_publish
from serve.live_snapshot import ServingState
from serve.past import AT_PREFIX

Scope = MutableMapping[str, Any]
TIMEMAP_PREFIX = "/_ductwork/v1/timemap"
LINK_FORMAT = "application/link-format"
# The longest spec target an answer links: its Link header names it about three times.
LINKED_TARGET_MAX = 2048
# What a path and query may hold as they are (RFC 3986's unreserved characters, the delimiters
# a path or query takes, and the percent sign of an escape already made); anything else is
# escaped in a Link.
_URI_SAFE = "/?@!$&'()*+,;=:-._~%"
_NOTHING_TO_ESCAPE = re.compile(rb"[A-Za-z0-9" + re.escape(_URI_SAFE.encode()) + rb"]*")
_VARY = b"vary"
_ACCEPT_DATETIME = b"Accept-Datetime"


def honours_accept_datetime(path: str) -> bool:
    """Whether a GET of ``path`` takes ``Accept-Datetime``: every spec path (the image sync's
    trigger refuses it, which depends on the header too)."""
    return family_of(path) is not None


def has_past(path: str) -> bool:
    """Whether ``path`` is a spec path with mementos (every one but the image sync's trigger)."""
    return family_of(path) is not None and path != PIM_IMAGE_SYNC


def memento_uri(version: str, target: str) -> str:
    """The memento of ``target`` (a spec path with its query) at the snapshot ``version``."""
    return f"{AT_PREFIX}{version}{target}"


def timemap_uri(target: str) -> str:
    """The TimeMap of ``target`` (a spec path with its query)."""
    return f"{TIMEMAP_PREFIX}{target}"


def request_target(raw_path: bytes, query: bytes) -> str:
    """A request's path and query as a URI reference, escaped as it came (what it does not
    escape, such as a space or ``<``, escaped here)."""
    target = _escaped(raw_path)
    return f"{target}?{_escaped(query)}" if query else target


def _escaped(part: bytes) -> str:
    # Most requests need no escape: one match says so at a fraction of the quoting's cost.
    if _NOTHING_TO_ESCAPE.fullmatch(part):
        return part.decode("ascii")
    return quote_from_bytes(part, safe=_URI_SAFE)


@lru_cache(maxsize=1024)
def _present_links(target: str) -> bytes:
    return (
        f'<{target}>; rel="original timegate", '
        f'<{timemap_uri(target)}>; rel="timemap"; type="{LINK_FORMAT}"'
    ).encode()


def _memento_links(target: str, memento: str, moment: str) -> bytes:
    return (
        f'{_present_links(target).decode()}, <{memento}>; rel="memento"; datetime="{moment}"'
    ).encode()


def merged_vary(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` (changed in place) with ``Accept-Datetime`` in their ``Vary`` (joined to
    the first ``Vary`` line there is; none changed when one already names it or ``*``)."""
    first = None
    for index, (name, value) in enumerate(headers):
        if name.lower() != _VARY:
            continue
        named = {part.strip().lower() for part in value.split(b",")}
        if b"*" in named or _ACCEPT_DATETIME.lower() in named:
            return headers
        if first is None:
            first = index
    if first is None:
        headers.append((_VARY, _ACCEPT_DATETIME))
        return headers
    name, value = headers[first]
    joined = value + b", " + _ACCEPT_DATETIME if value.strip() else _ACCEPT_DATETIME
    headers[first] = (name, joined)
    return headers


def _header(headers: list[tuple[bytes, bytes]], wanted: bytes) -> bytes | None:
    for name, value in headers:
        if name.lower() == wanted:
            return value
    return None


_VARY_ACCEPT_DATETIME = (_VARY, _ACCEPT_DATETIME)


def present_spec_headers(raw_path: bytes, query: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """What ``linked`` adds to an answer of the present to a GET of a spec path with mementos
    (``raw_path`` and ``query`` as the request came) whose headers hold no ``Vary``: the same
    lines, worked out without reading those headers (for the short path, on every answer)."""
    target = request_target(raw_path, query)
    if len(target) > LINKED_TARGET_MAX:
        return (_VARY_ACCEPT_DATETIME,)
    return (_VARY_ACCEPT_DATETIME, (b"link", _present_links(target)))


class Asked(NamedTuple):  # made for every request: a tuple is the cheapest to build
    """What a request names: the spec path with its query whose answer it gets (``target``),
    whether the request's own URI is that path (where ``Accept-Datetime`` negotiates), and the
    request's URI as it came."""

    target: str | None
    negotiates: bool
    uri: str


def asked_of(scope: Scope) -> Asked | None:
    """The spec path a GET or HEAD names, directly or through ``/at/``; None for any other."""
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return None
    path: str = scope["path"]
    negotiates = honours_accept_datetime(path)
    if negotiates:
        inner = path
    elif path.startswith(AT_PREFIX):
        inner = "/" + path[len(AT_PREFIX) :].partition("/")[2]
    else:
        return None
    raw: bytes = scope.get("raw_path") or path.encode()
    query: bytes = scope.get("query_string", b"")
    uri = request_target(raw, query)
    if negotiates:
        return Asked(uri if has_past(path) else None, True, uri)
    if not has_past(inner):
        return None
    _, slash, inner_raw = raw[len(AT_PREFIX) :].partition(b"/")
    return Asked(request_target(slash + inner_raw, query), False, uri)


def linked(headers: list[tuple[bytes, bytes]], asked: Asked) -> list[tuple[bytes, bytes]]:
    """The answer's headers (a list of its own, changed in place) with what RFC 7089 adds to
    them. A target too long to be written
    three times in one header line within what clients read (8 KiB in aiohttp and nginx) is
    not linked: the answer goes out as the upstream's would."""
    if asked.negotiates:
        headers = merged_vary(headers)
    if asked.target is None or len(asked.target) > LINKED_TARGET_MAX:
        return headers
    moment = _header(headers, b"memento-datetime")
    if moment is None:  # an answer of the present
        headers.append((b"link", _present_links(asked.target)))
        return headers
    version = _header(headers, b"x-snapshot-version")
    if version is None:
        headers.append((b"link", _present_links(asked.target)))
        return headers
    memento = memento_uri(version.decode("latin-1"), asked.target)
    links = _memento_links(asked.target, memento, moment.decode("latin-1"))
    headers = [*headers, (b"link", links)]
    if asked.uri != memento:
        headers.append((b"content-location", memento.encode()))
    return headers


class MementoLinks:
    """Adds ``Vary: Accept-Datetime``, ``Link`` and ``Content-Location`` to the answers of the
    spec's paths and of their mementos (outside the past's layer, whose ``Memento-Datetime``
    tells a memento from the present)."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        asked = asked_of(scope)
        if asked is None:
            await self.app(scope, receive, send)
            return

        async def linking(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = linked(list(message.get("headers", ())), asked)
            await send(message)

        await self.app(scope, receive, linking)


@dataclass(frozen=True)
class KeptPublish:
    """A publish the history keeps, with its time written both ways the TimeMap writes it."""

    version: str
    http_date: str
    rfc3339: str


class KeptPublishes:
    """What the served snapshot's history tells of its publishes, worked out once per snapshot:
    their times as a TimeMap writes them (it lists them all, some thousands over the history's
    90 days), and what each changed per stream (a count over the whole log of changes)."""

    def __init__(self) -> None:
        self._version = ""
        self._kept: tuple[KeptPublish, ...] = ()
        self._counts: dict[int, dict[str, Counts]] | None = None
        self._lock = threading.Lock()

    def of(self, state: ServingState) -> tuple[KeptPublish, ...]:
        """The publishes ``state``'s history keeps, oldest first, formatted."""
        with self._lock:
            self._follow(state)
            return self._kept

    def counts(self, state: ServingState) -> dict[int, dict[str, Counts]]:
        """What each publish ``state``'s history keeps changed, per stream (a blocking call:
        the first for a snapshot reads its history)."""
        with self._lock:
            self._follow(state)
            if self._counts is None:
                self._counts = changes_per_publish(state.reader.cursor())
            return self._counts

    def _follow(self, state: ServingState) -> None:
        if state.version == self._version:
            return
        self._kept = tuple(
            KeptPublish(
                p.version, http_date(p.published_at, usegmt=True), format_datetime(p.published_at)
            )
            for p in state.publishes
        )
        self._counts = None
        self._version = state.version


def timemap_links(target: str, kept: tuple[KeptPublish, ...]) -> bytes:
    """The TimeMap of ``target`` in ``application/link-format``: the original (its own
    TimeGate), the TimeMap itself with the span it covers, then each memento, oldest first."""
    first, last = kept[0], kept[-1]
    lines = [
        f'<{target}>; rel="original timegate"',
        f'<{timemap_uri(target)}>; rel="self"; type="{LINK_FORMAT}"; '
        f'from="{first.http_date}"; until="{last.http_date}"',
    ]
    for index, publish in enumerate(kept):
        rel = "memento"
        if index == 0:
            rel = "first " + rel
        if index == len(kept) - 1:
            rel = "last " + rel if index else "first last memento"
        uri = memento_uri(publish.version, target)
        lines.append(f'<{uri}>; rel="{rel}"; datetime="{publish.http_date}"')
    return (",\n".join(lines) + "\n").encode()


def timemap_json(target: str, kept: tuple[KeptPublish, ...]) -> bytes:
    """The same TimeMap as JSON: date-times in RFC 3339, each memento with its version."""
    return dumps(
        {
            "original": target,
            "timegate": target,
            "timemap": timemap_uri(target),
            "from": kept[0].rfc3339,
            "until": kept[-1].rfc3339,
            "mementos": [
                {
                    "datetime": publish.rfc3339,
                    "version": publish.version,
                    "uri": memento_uri(publish.version, target),
                }
                for publish in kept
            ],
        }
    )
