"""The admin API under ``/_sandbox/``: same Bearer key as the service, never faulted.

- ``GET /_sandbox/faults``, ``PUT /_sandbox/faults`` (a JSON object of settings to change)
- ``POST /_sandbox/mutate`` (``{"assets_updated": n, ...}``; answers the ids touched)
- ``POST /_sandbox/delete`` (``{"leads": [id, ...]}``: deletes those leads; answers the ids
  deleted)
- ``GET /_sandbox/stats`` (record counts and counters)
- ``GET /_sandbox/log`` (recent requests: arrival time, answer time, path, query string,
  status; -1 for a dropped connection)
"""

from __future__ import annotations

import orjson

from ductwork.contract.encoding import dumps
from sandbox.asgi import Answer, Receive, Scope, Send, read_body, send_answer
from sandbox.mutations import validate_counts
from sandbox.state import SandboxState

PREFIX = "/_sandbox/"


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, dumps(body), headers=headers or {})


class AdminApi:
    """ASGI handler of the admin paths."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from sandbox.app import authorised

        if not authorised(scope, self.state.api_key):
            answer = _json({"error": "unauthorized"}, 401, {"WWW-Authenticate": "Bearer"})
        else:
            try:
                answer = await self.answer(scope["method"], scope["path"][len(PREFIX) :], receive)
            except ValueError as exc:  # bad JSON or settings
                answer = _json({"error": str(exc)}, 400)
        await send_answer(send, answer)

    async def answer(self, method: str, name: str, receive: Receive) -> Answer:
        """Dispatch one admin request; ValueError for a bad body."""
        state = self.state
        allowed = {
            "faults": ("GET", "PUT"),
            "mutate": ("POST",),
            "delete": ("POST",),
            "stats": ("GET",),
            "log": ("GET",),
        }
        if name not in allowed:
            return _json({"error": f"no admin path {name!r}"}, 404)
        if method not in allowed[name]:
            return _json({"error": "method not allowed"}, 405, {"Allow": ", ".join(allowed[name])})
        if name == "faults":
            if method == "PUT":
                changes = _object(await read_body(receive))
                state.faults = state.faults.updated(changes)  # a new object: rolls restart
            return _json(state.faults.as_json())
        if name == "mutate":
            counts = validate_counts(_object(await read_body(receive)))
            return _json(state.mutate(counts))
        if name == "delete":
            return _json({"leads": state.delete_leads(_ids(_object(await read_body(receive))))})
        if name == "stats":
            with state.lock:
                return _json(state.stats())
        return _json([list(entry) for entry in state.request_log])


def _ids(body: dict) -> list[str]:
    """The lead ids of a delete request; ValueError unless ``leads`` is a list of strings."""
    unknown = sorted(set(body) - {"leads"})
    if unknown:
        raise ValueError(f"unknown record kinds: {', '.join(unknown)}")
    ids = body.get("leads", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError("leads must be a list of lead ids")
    return ids


def _object(body: bytes) -> dict:
    try:
        value = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("body must be a JSON object")
    return value
