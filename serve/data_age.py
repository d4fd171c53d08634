"""How old the data behind an answer is.

Every answer on a path of a stream carries ``X-Synced-At``: when that stream last synced
successfully (``ductwork.snapshots.sync_times``; for a data folder whose publishes wrote no
times yet, when a sync last published or confirmed the snapshot). With
``DUCTWORK_SERVE_MAX_AGE_S`` set, a request whose stream is older than that gets a 503 in its
family's style with ``Retry-After`` instead of the data, before its key is looked at: a stale
mirror fails loudly rather than serving old data silently. The mirror's own paths are left
alone, and so are answers from the past (``/at/`` or ``Accept-Datetime``, which ``serve.past``
marks before this layer): a memento's data is of its time by definition, so it is neither dated
nor refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from ductwork.contract.encoding import format_datetime
from ductwork.contract.errors import ApiError, ErrorCode
from ductwork.streams.registry import stream_serving
from serve.live_snapshot import PAST_STATE
from serve.responses import error_response

Scope = MutableMapping[str, Any]
RETRY_AFTER_S = 60  # a scheduled sync runs every 15 minutes at the most often


def stale(stream: str, synced: float, max_age_s: float) -> ApiError:
    """The 503 of a request whose stream last synced longer than ``max_age_s`` ago (a Problem
    names the time in ``syncedAt``, as a 410 names ``oldest``)."""
    when = format_datetime(datetime.fromtimestamp(synced, UTC))
    return ApiError(
        ErrorCode.UNAVAILABLE,
        f"The {stream} data is older than {max_age_s:g} s (last synced at {when})",
        retry_after=RETRY_AFTER_S,
        problem_members={"syncedAt": when},
    )


class AgeRule:
    """What the data's age makes of a request: its ``X-Synced-At``, or a 503 past the maximum
    age (None: no maximum)."""

    def __init__(self, max_age_s: float | None) -> None:
        self.max_age_s = max_age_s
        self._encoded: dict[float, bytes] = {}

    def verdict(self, scope: Scope) -> bytes | ApiError | None:
        """For a request of a stream's present data: its ``X-Synced-At`` value, or the 503
        when that stream is older than the maximum age; None for any other request (or
        before the first snapshot)."""
        stream = stream_serving(scope["path"]) if scope["type"] == "http" else None
        if stream is None or PAST_STATE in scope:  # not a data path, or an answer of the past
            return None
        live = scope["app"].state.live
        state = live.get()
        if state is None:
            return None
        synced = live.synced_at(stream.name, state)
        if self.max_age_s is not None and time.time() - synced > self.max_age_s:
            return stale(stream.name, synced, self.max_age_s)
        return self._format(synced)

    def _format(self, synced: float) -> bytes:
        """The header's value, formatted once per distinct time."""
        found = self._encoded.get(synced)
        if found is None:
            if len(self._encoded) > 64:
                self._encoded.clear()
            found = format_datetime(datetime.fromtimestamp(synced, UTC)).encode()
            self._encoded[synced] = found
        return found


class DataAge:
    """Dates every answer on a stream's path, and refuses those past the maximum age."""

    def __init__(self, app: Callable, rule: AgeRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        verdict = self.rule.verdict(scope)
        if verdict is None:  # not a data path, or nothing to answer from yet
            await self.app(scope, receive, send)
            return
        if isinstance(verdict, ApiError):
            await error_response(verdict, scope["path"])(scope, receive, send)
            return
        header = (b"x-synced-at", verdict)

        async def dated(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        await self.app(scope, receive, dated)
