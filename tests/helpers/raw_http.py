"""HTTP/1.1 written byte by byte on sockets: requests no client library would send, and many
small requests at a rate a client library cannot reach on two cores."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


def address_of(url: str) -> tuple[str, int]:
    """Host and port of an ``http://host:port`` URL."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None, url
    return parts.hostname, parts.port


def request_bytes(url: str, target: str, headers: dict[str, str]) -> bytes:
    """A GET of ``target`` (sent as it is) with ``headers``, keeping the connection open."""
    host, port = address_of(url)
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def send_and_read(url: str, data: bytes, timeout_s: float) -> bytes:
    """Send ``data`` on a new connection; everything the server sent until it closed the
    connection (a reset counts as a close). Raises TimeoutError if it stays open."""
    received = bytearray()
    with socket.create_connection(address_of(url), timeout=timeout_s) as sock:
        # The server may stop reading and close early: what it answered is still read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        deadline = time.monotonic() + timeout_s
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    return bytes(received)


def status_of(answer: bytes) -> int | None:
    """The status code of a raw answer, or None when there was none."""
    if not answer.startswith(b"HTTP/1.1 "):
        return None
    return int(answer[9:12])


def headers_of(answer: bytes) -> dict[str, str]:
    """The header fields of a raw answer, names lowercased."""
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {
        name.lower(): value.strip() for name, _, value in (line.partition(":") for line in head)
    }


def seconds_until_closed(url: str, sent: bytes, drip: bytes, limit_s: float) -> float:
    """Send ``sent``, then ``drip`` every half second while the connection stays open; the
    seconds until the server closed it. Raises TimeoutError past ``limit_s``."""
    started = time.monotonic()
    with socket.create_connection(address_of(url), timeout=limit_s) as sock:
        if sent:
            sock.sendall(sent)
        while time.monotonic() - started < limit_s:
            sock.settimeout(0.5)
            try:
                if not sock.recv(65536):
                    return time.monotonic() - started
            except TimeoutError:
                if drip:
                    try:
                        sock.sendall(drip)
                    except (BrokenPipeError, ConnectionResetError):
                        return time.monotonic() - started
                continue
            except ConnectionResetError:
                return time.monotonic() - started
    raise TimeoutError(f"the connection was still open after {limit_s} s")


@dataclass(frozen=True)
class Answer:
    """One answer read off a keep-alive connection."""

    status: int
    headers: dict[str, str]
    body: bytes


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    head = await reader.readuntil(b"\r\n\r\n")
    headers = headers_of(head)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(head[9:12]), headers, body)


async def get_many(url: str, requests: Sequence[bytes], connections: int) -> list[Answer]:
    """Send each of ``requests`` (whole GETs from ``request_bytes``) over ``connections``
    keep-alive connections, one request at a time on each; the answers in request order."""
    answers: list[Answer | None] = [None] * len(requests)
    next_index = 0
    host, port = address_of(url)

    async def one_connection() -> None:
        nonlocal next_index
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while next_index < len(requests):
                index, next_index = next_index, next_index + 1
                writer.write(requests[index])
                answers[index] = await _read_answer(reader)
        finally:
            writer.close()

    await asyncio.gather(*(one_connection() for _ in range(connections)))
    return [answer for answer in answers if answer is not None]


def session_rss_bytes(leader: int) -> int:
    """The resident memory of every process in the session ``leader`` started (a server and
    its workers), from ``/proc``."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # The fields after the command's closing parenthesis: state, ppid, pgrp, session.
            session = int(stat.rsplit(")", 1)[1].split()[3])
            if session != leader:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # a process that ended meanwhile
    return total
