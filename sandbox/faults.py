"""Misbehaviour layered over the sandbox: latency, 5xx, 429 and dropped connections, plus
mutations every N requests and a log of every request."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ductwork.contract.errors import ApiError, ErrorCode, rate_limited
from sandbox.app import error_response
from sandbox.state import SandboxState

Scope = MutableMapping[str, Any]
UNFAULTED = ("/_sandbox/", "/media/")


class FaultInjector:
    """Pure ASGI middleware; rates are read from ``state.faults`` on every request."""

    def __init__(self, app: Callable[..., Awaitable[None]], state: SandboxState) -> None:
        self.app = app
        self.state = state
        self.random = random.Random(state.faults.seed)
        self._seed = state.faults.seed

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["path"].startswith(UNFAULTED):
            await self.app(scope, receive, send)
            return
        state, faults = self.state, self.state.faults
        if faults.seed != self._seed:
            self.random, self._seed = random.Random(faults.seed), faults.seed
        state.requests_seen += 1
        if faults.mutate_every and state.requests_seen % faults.mutate_every == 0:
            state.mutate(faults.mutation)
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000)
        status = {"code": 0}

        async def logged_send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        roll = self.random.random()
        try:
            if roll < faults.drop_rate:
                await _drop(send)
                status["code"] = -1
                return
            roll -= faults.drop_rate
            if roll < faults.error_rate:
                code = self.random.choice([500, 502, 503, 504])
                fault = ApiError(ErrorCode.INTERNAL, "Injected fault")
                await _send_error(scope, logged_send, fault, code)
                return
            roll -= faults.error_rate
            if roll < faults.rate_limit_rate:
                await _send_error(scope, logged_send, rate_limited(faults.retry_after_s), 429)
                return
            await self.app(scope, receive, logged_send)
        finally:
            state.log_request(scope["path"], status["code"])


async def _send_error(scope: Scope, send: Callable, error: ApiError, status: int) -> None:
    response = error_response(error, scope["path"])
    response.status_code = status
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


async def _drop(send: Callable) -> None:
    """Promise a body, send part of it, then give up: the client sees the connection close."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"success":true,"da', "more_body": True})
    raise ConnectionAbortedError("connection dropped by the sandbox on purpose")
