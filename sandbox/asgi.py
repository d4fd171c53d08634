"""Minimal ASGI plumbing: an answer value, sending it, reading a request body and headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ductwork.contract.errors import ErrorAnswer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
JSON = "application/json"


@dataclass(frozen=True)
class Answer:
    """A complete HTTP response."""

    status: int
    body: bytes
    media_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_error(cls, answer: ErrorAnswer) -> Answer:
        """The answer of a rendered contract error."""
        return cls(answer.status, answer.body, answer.media_type, dict(answer.headers))

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """ASGI header pairs, with content type and length."""
        pairs = [
            (b"content-type", self.media_type.encode("latin-1")),
            (b"content-length", str(len(self.body)).encode("latin-1")),
        ]
        pairs += [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()
        ]
        return pairs


async def send_answer(send: Send, answer: Answer) -> None:
    """Send a whole response."""
    await send(
        {"type": "http.response.start", "status": answer.status, "headers": answer.raw_headers()}
    )
    await send({"type": "http.response.body", "body": answer.body})


async def read_body(receive: Receive, limit: int = 1 << 20) -> bytes:
    """The request body (at most ``limit`` bytes)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ValueError(f"request body larger than {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case)."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def serve_lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge lifespan startup and shutdown (the sandbox holds nothing to open)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
