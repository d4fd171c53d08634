"""Answers recorded from the sandbox, kept as the replay upstream writes them to a socket.

Each answer is stored whole: the sandbox's status line, the headers a client reads, a
``content-length`` and the body, under the canonical form of the request target it answered
(``target_key``). A recording file is a short magic line, then one entry per answer: the key's
length and the answer's length (4 bytes each, big-endian), the key, the answer.

Headers the server writes afresh for every answer (``date``, ``server``) and those that belong
to one connection or one framing (``connection``, ``keep-alive``, ``transfer-encoding``,
``content-length``) are left out; everything else the sandbox sent is kept as it sent it.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import TracebackType
from typing import BinaryIO
from urllib.parse import parse_qsl, quote, unquote

MAGIC = b"ductwork replay recording 1\n"
_LENGTHS = struct.Struct(">II")
DROPPED_HEADERS = frozenset(
    {b"date", b"server", b"connection", b"keep-alive", b"transfer-encoding", b"content-length"}
)


def target_key(target: str) -> str:
    """The canonical form of a request target: the path and each query name and value
    percent-decoded, the query pairs sorted, then all encoded again one way.

    Clients spell one request differently: aiohttp leaves ``:`` and ``/`` as they are in a
    query value, ``urlencode`` escapes them, and a query's parameters come in whatever order
    the caller built them. The sandbox decodes all of these to the same request, so the
    replay must too.
    """
    path, _, query = target.partition("?")
    key = quote(unquote(path), safe="/")
    if not query:
        return key
    pairs = sorted(parse_qsl(query, keep_blank_values=True))
    return key + "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in pairs)


def ready_answer(status_line: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A complete HTTP/1.1 response: ``status_line`` (``HTTP/1.1 200 OK``), the headers, a
    ``content-length`` and the body."""
    lines = [status_line, *(name + b": " + value for name, value in headers)]
    lines.append(b"content-length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def json_answer(status: int, reason: str, body: bytes) -> bytes:
    """A complete response with a JSON body, for the replay's own answers."""
    status_line = f"HTTP/1.1 {status} {reason}".encode()
    return ready_answer(status_line, [(b"content-type", b"application/json")], body)


def answer_from_raw(head: bytes, body: bytes) -> bytes:
    """The answer to store for a response received as ``head`` (status line and header lines,
    as read from the socket, with or without the final blank line) and its whole body."""
    status_line, *lines = head.rstrip(b"\r\n").split(b"\r\n")
    headers = []
    for line in lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() not in DROPPED_HEADERS:
            headers.append((name.strip(), value.strip()))
    return ready_answer(status_line, headers, body)


class RecordingWriter:
    """Writes a recording file one answer at a time; use it with ``with``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers = 0
        self._file: BinaryIO | None = None

    def __enter__(self) -> RecordingWriter:
        self._file = open(self.path, "wb")
        self._file.write(MAGIC)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def add(self, target: str, head: bytes, body: bytes) -> None:
        """Record the answer received (``head``, ``body``) to a GET of ``target``."""
        if self._file is None:
            raise RuntimeError("RecordingWriter used outside 'with'")
        key = target_key(target).encode("ascii")
        answer = answer_from_raw(head, body)
        self._file.write(_LENGTHS.pack(len(key), len(answer)))
        self._file.write(key)
        self._file.write(answer)
        self.answers += 1


def read_recording(path: Path) -> dict[bytes, bytes]:
    """Every answer of a recording file, by its target's canonical form (ASCII bytes)."""
    answers: dict[bytes, bytes] = {}
    with open(path, "rb") as source:
        if source.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{path} is not a replay recording")
        while lengths := source.read(_LENGTHS.size):
            if len(lengths) != _LENGTHS.size:
                raise ValueError(f"{path} ends inside an entry")
            key_length, answer_length = _LENGTHS.unpack(lengths)
            key, answer = source.read(key_length), source.read(answer_length)
            if len(answer) != answer_length:
                raise ValueError(f"{path} ends inside an entry")
            answers[key] = answer
    return answers
