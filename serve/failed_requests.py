"""A limit on failed requests per client address, so that keys cannot be guessed at line rate.

Every 401, and every 404 answered to a request that presented no valid key, counts against the
client's address (an IPv6 client's /64) in a moving one-second window of
``DUCTWORK_SERVE_FAILED_REQUESTS_PER_SECOND``. A client that has used it up gets 429, in its
path family's style, to every request until the window has room again, before its key is even
looked at: the answer tells nothing about the key it sent, and costs a dictionary lookup.

Failures are counted where the other limits are (Redis when configured, so across every worker
and replica); each process refuses from what it learned when a failure of that client was
refused there. A client spreading its guesses over many processes is therefore let through at
most one failure more per process and window.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ductwork.contract.errors import rate_limited
from serve.deps import KEY_COUNTED
from serve.rate_limit import RequestLimit, client_of
from serve.responses import error_response

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]
# Refusals still running are few; past this many, ended ones are forgotten before a new one.
_SWEEP_ABOVE = 1024


class RefusedClients:
    """The clients this process refuses, each until a moment of ``time.monotonic``."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def __bool__(self) -> bool:
        """Whether any client is (or was, not yet forgotten) refused."""
        return bool(self._until)

    def refusing(self, client: str) -> float | None:
        """Seconds left of ``client``'s refusal; None when it is not refused (any refusal
        that ended is forgotten)."""
        until = self._until.get(client)
        if until is None:
            return None
        left = until - time.monotonic()
        if left > 0:
            return left
        del self._until[client]
        return None

    def refuse(self, client: str, wait: int) -> None:
        """Refuse ``client`` for ``wait`` seconds from now."""
        now = time.monotonic()
        if len(self._until) > _SWEEP_ABOVE:
            for ended in [c for c, until in self._until.items() if until <= now]:
                del self._until[ended]
        self._until[client] = now + wait


def client_address(scope: Scope) -> str:
    """The address a request's failures count against (an IPv6 client's /64)."""
    return client_of((scope.get("client") or ("unknown",))[0])


class FailedRequestLimit:
    """Refuses every request of a client that had too many failed ones this window."""

    def __init__(
        self, app: ASGIApp, limit: RequestLimit, refused: RefusedClients | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.refused = refused if refused is not None else RefusedClients()

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Parsing the address costs more than the rest: only when some client is refused.
        left = self.refused.refusing(client_address(scope)) if self.refused else None
        if left is not None:
            refusal = rate_limited(math.ceil(left), "Too many failed requests")
            await error_response(refusal, scope["path"])(scope, receive, send)
            return
        status = 0

        async def noting_status(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, noting_status)
        if status == 401 or (status == 404 and not scope.get(KEY_COUNTED)):
            client = client_address(scope)
            wait = await self.limit.check(client)
            if wait is not None:
                self.refused.refuse(client, wait)
