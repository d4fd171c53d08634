"""Misbehaviour layered over the sandbox: latency, 5xx, 429, dropped connections, truncated
JSON, HTML error pages with status 200, a revoked key, mutations every N requests, gzip bombs
and floods of header fields; plus the request log. (The lead list's looping cursor and the
endless page-number lists are the handlers' own, in ``sandbox.app``.)

Rolls come from a ``random.Random`` seeded with ``Faults.seed`` and restarted whenever the
settings are replaced (``PUT /_sandbox/faults``), so a run's sequence of faults repeats.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from ductwork.contract.encoding import dumps, loads
from ductwork.contract.errors import PROBLEM_JSON, ApiError, ErrorCode, rate_limited, unauthorized
from sandbox.app import SandboxApp, error_answer
from sandbox.asgi import Answer, Message, Receive, Scope, Send, send_answer
from sandbox.fault_settings import RATES, Faults
from sandbox.gzip_bomb import bomb
from sandbox.state import SandboxState

UNFAULTED = ("/_sandbox/", "/media/")
# Header fields the ``header_flood`` switch adds to every answer: some eighty kilobytes.
FLOOD_FIELDS = 5000
SERVER_ERRORS = (500, 502, 503, 504)
_TITLES = {
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_DROP_MESSAGE = "ASGI callable returned without completing response."
HTML_ERROR_PAGE = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The upstream server is temporarily unavailable.</p>"
    b"</body></html>"
)


class _QuietDrops(logging.Filter):
    """Hide uvicorn's complaint about the responses the sandbox cuts short on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _DROP_MESSAGE


def quiet_drops() -> None:
    """Install the filter on uvicorn's error logger (once)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in logger.filters):
        logger.addFilter(_QuietDrops())


def server_error(status: int, path: str) -> Answer:
    """An injected 500/502/503/504 in the family's error style, its status in the body too."""
    answer = error_answer(ApiError(ErrorCode.INTERNAL, f"Injected fault ({status})"), path)
    body = answer.body
    if answer.media_type == PROBLEM_JSON:
        problem = loads(body)
        problem["status"], problem["title"] = status, _TITLES[status]
        body = dumps(problem)
    return Answer(status, body, answer.media_type, answer.headers)


def bombed(answer: Answer) -> Answer:
    """The answer sent as a gzip bomb: its body behind a gigabyte of compressed whitespace."""
    headers = {**answer.headers, "Content-Encoding": "gzip"}
    return Answer(answer.status, bomb(answer.body), answer.media_type, headers)


def flooded(answer: Answer) -> Answer:
    """The answer with ``FLOOD_FIELDS`` header fields more."""
    flood = {f"X-Flood-{n}": "1" for n in range(FLOOD_FIELDS)}
    return Answer(answer.status, answer.body, answer.media_type, {**answer.headers, **flood})


def fault_of(faults: Faults, roll: float) -> str | None:
    """The fault a roll in [0, 1) lands on (a rate name without ``_rate``), or None."""
    for name in RATES:
        rate = getattr(faults, name)
        if roll < rate:
            return name.removesuffix("_rate")
        roll -= rate
    return None


class FaultInjector:
    """ASGI middleware reading ``state.faults`` on every request."""

    def __init__(self, app: SandboxApp, state: SandboxState) -> None:
        self.app = app
        self.state = state
        self._settings: Faults | None = None
        self._random = random.Random(0)
        quiet_drops()

    def _rolls(self) -> random.Random:
        faults = self.state.faults
        if faults is not self._settings:
            self._settings, self._random = faults, random.Random(f"faults:{faults.seed}")
        return self._random

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(UNFAULTED):
            await self.app(scope, receive, send)
            return
        arrived = time.time()
        state, rolls = self.state, self._rolls()
        faults = state.faults
        state.requests_seen += 1
        if faults.mutate_every and state.requests_seen % faults.mutate_every == 0:
            state.mutate(faults.mutation)
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000)
        path, query = scope["path"], scope.get("query_string", b"").decode("latin-1")
        if faults.revoke_after and state.requests_seen > faults.revoke_after:
            answer = error_answer(unauthorized(), path)
        else:
            answer = await self._rolled_answer(scope, rolls.random(), rolls)
        if answer is None:
            await self._drop(scope, send)
            state.log_request(arrived, time.time(), path, query, -1)
            return
        if faults.gzip_bomb:
            answer = bombed(answer)
        if faults.header_flood:
            answer = flooded(answer)
        answered = time.time()
        await send_answer(send, answer)
        state.log_request(arrived, answered, path, query, answer.status)

    async def _rolled_answer(
        self, scope: Scope, roll: float, rolls: random.Random
    ) -> Answer | None:
        """The answer one roll picks: a fault, the real answer, or None for a dropped one."""
        faults, path = self.state.faults, scope["path"]
        kind = fault_of(faults, roll)
        if kind is None:
            return await self.app.answer(scope)
        if kind == "drop":
            return None
        if kind == "error":
            return server_error(rolls.choice(SERVER_ERRORS), path)
        if kind == "rate_limit":
            return error_answer(rate_limited(faults.retry_after_s), path)
        if kind == "html":
            return Answer(200, HTML_ERROR_PAGE, "text/html; charset=utf-8")
        answer = await self.app.answer(scope)
        if answer.status != 200 or len(answer.body) < 2:
            return answer
        return Answer(200, answer.body[: len(answer.body) // 2], answer.media_type, answer.headers)

    async def _drop(self, scope: Scope, send: Send) -> None:
        """Promise the real answer's length, send part of it, and stop: uvicorn then closes
        the connection, and the client sees a truncated body."""
        answer = await self.app.answer(scope)
        start: Message = {
            "type": "http.response.start",
            "status": answer.status,
            "headers": answer.raw_headers(),
        }
        await send(start)
        await send(
            {
                "type": "http.response.body",
                "body": answer.body[: len(answer.body) // 2],
                "more_body": True,
            }
        )
