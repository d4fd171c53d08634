"""The upstream client's transport (``ductwork.upstream.http_pool``) against real HTTP servers on
127.0.0.1 that answer scripted bytes: the ways an HTTP/1.1 answer can be framed and encoded, and
the ways a connection can end."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable

import pytest

from ductwork.upstream.http_pool import (
    MAX_HEAD_BYTES,
    MAX_HEADER_FIELDS,
    BodyTooLarge,
    ConnectionLost,
    ConnectionPool,
    HeadTooLarge,
    Origin,
    RawAnswer,
    request_target,
)
from sandbox.gzip_bomb import INFLATED_PADDING, bomb

# What the scripted server does with one connection: read requests, write answers.
Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
BODY = b'{"data":[1,2,3],"name":"\xc3\xa9t\xc3\xa9"}'
CAP = 1 << 20


def answer_head(*lines: str) -> bytes:
    """A 200 head with ``lines`` as its headers."""
    return ("HTTP/1.1 200 OK\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


def sized(body: bytes, *lines: str) -> bytes:
    """A 200 answer with a Content-Length."""
    return answer_head(f"Content-Length: {len(body)}", *lines) + body


def answering(*answers: bytes) -> Script:
    """A connection that answers its requests with ``answers`` in turn, then closes."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in answers:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
        writer.close()

    return script


async def served(
    script: Script, *requests: str, cap: int = CAP, timeout_s: float = 5
) -> list[RawAnswer]:
    """``GET`` each of ``requests`` in turn through one pool, from a server running ``script``
    on each connection."""
    server = await asyncio.start_server(script, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool({"Accept": "application/json"}, cap, timeout_s=timeout_s)
    try:
        origin, _ = Origin.split(f"http://127.0.0.1:{port}")
        return [await asyncio.wait_for(pool.get(origin, target), 10) for target in requests]
    finally:
        pool.close()
        server.close()


def run(script: Script, *requests: str, cap: int = CAP, timeout_s: float = 5) -> list[RawAnswer]:
    return asyncio.run(served(script, *requests, cap=cap, timeout_s=timeout_s))


def test_length_chunked_and_close_delimited_bodies_arrive_whole() -> None:
    chunked = answer_head("Transfer-Encoding: chunked") + b"5\r\n" + BODY[:5] + b"\r\n"
    chunked += f"{len(BODY) - 5:x}\r\n".encode() + BODY[5:] + b"\r\n0\r\n\r\n"
    until_close = answer_head("Connection: close") + BODY
    [by_length, by_chunks] = run(answering(sized(BODY), chunked), "/a", "/b")
    [by_close] = run(answering(until_close), "/c")
    assert by_length.body == by_chunks.body == by_close.body == BODY
    assert by_length.status == 200


def test_gzip_of_several_members_and_both_kinds_of_deflate_are_inflated() -> None:
    members = gzip.compress(BODY[:10]) + gzip.compress(BODY[10:])
    wrapped = zlib.compress(BODY)
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = raw_deflate.compress(BODY) + raw_deflate.flush()
    answers = run(
        answering(
            sized(members, "Content-Encoding: gzip"),
            sized(wrapped, "Content-Encoding: deflate"),
            sized(raw, "Content-Encoding: deflate"),
        ),
        "/a", "/b", "/c",
    )  # fmt: skip
    assert [answer.body for answer in answers] == [BODY, BODY, BODY]


def test_a_gzip_bomb_is_refused_at_the_cap_after_a_bounded_inflation() -> None:
    bombed = bomb(BODY)
    with pytest.raises(BodyTooLarge) as refused:
        run(answering(sized(bombed, "Content-Encoding: gzip")), "/", cap=CAP)
    # Refused one byte past the cap: not after inflating the gigabyte of padding.
    assert refused.value.args == (CAP + 1,)
    assert INFLATED_PADDING > 1000 * CAP


def test_a_body_cut_short_by_the_connection_is_lost_not_returned() -> None:
    cut = answer_head(f"Content-Length: {len(BODY)}") + BODY[:10]
    with pytest.raises(ConnectionLost, match="before the answer ended"):
        run(answering(cut), "/")


def test_bytes_that_are_not_http_are_a_lost_connection() -> None:
    with pytest.raises(ConnectionLost, match=r"not HTTP/1\.1"):
        run(answering(b"SSH-2.0-OpenSSH_9.2\r\n\r\n"), "/")


def test_a_kept_alive_connection_closed_while_idle_is_replaced_at_no_cost() -> None:
    connections: list[int] = []

    async def one_answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Answers one request as if keeping the connection, then closes it (a keep-alive timeout).
        connections.append(1)
        await answering(sized(BODY))(reader, writer)

    answers = run(one_answer_each, "/a", "/b", "/c")
    assert [answer.body for answer in answers] == [BODY] * 3
    assert len(connections) == 3


def test_one_connection_carries_requests_in_turn_with_the_pool_headers_and_retry_after() -> None:
    seen: list[bytes] = []

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in (sized(b"{}", "Retry-After: 7"), sized(BODY)):
            seen.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(answer)
            await writer.drain()
        writer.close()

    first, second = run(recording, request_target("/x", {"q": "a b+c:d"}), "/y")
    assert first.retry_after == "7" and second.retry_after is None
    assert seen[0].startswith(b"GET /x?q=a+b%2Bc%3Ad HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nAccept: application/json\r\n" in seen[0]
    assert second.body == BODY and len(seen) == 2


def test_an_answer_not_whole_by_its_deadline_times_out_soon_after() -> None:
    async def half_an_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer_head(f"Content-Length: {len(BODY)}") + BODY[:5])  # then nothing
        await reader.read()  # until the client gives the answer up

    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no whole answer within 0\.4 s"):
        run(half_an_answer, "/", timeout_s=0.4)
    waited = time.monotonic() - started
    # Due 0.4 s after the request began; the watchdog looks every 0.1 s.
    assert 0.4 <= waited < 2.0


def test_an_origin_splits_from_its_url_and_a_target_joins_its_query_to_one_it_has() -> None:
    origin, rest = Origin.split("https://[::1]:8443/api/v1/x?a=1")
    assert (origin.tls, origin.host, origin.port) == (True, "::1", 8443)
    assert origin.netloc == "[::1]:8443"
    assert rest == "/api/v1/x?a=1"
    assert Origin.split("http://example.test")[1] == ""
    assert Origin.split("http://example.test")[0].port == 80
    assert request_target(rest, {"b": "2 3"}) == "/api/v1/x?a=1&b=2+3"
    assert request_target("", None) == "/"
    with pytest.raises(ValueError, match="not an http"):
        Origin.split("ftp://example.test/x")


def endless(start: bytes, sent: list[int]) -> Script:
    """A connection that answers its request with ``start`` and then an endless run of ``a``
    (a field's value without end), adding each write's size to ``sent`` until the client
    closes the connection (or a gigabyte has gone, so that the test ends either way)."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(start)
        more = b"a" * 16384
        try:
            while sum(sent) < 1 << 30:
                writer.write(more)
                await writer.drain()
                sent.append(len(more))
        except ConnectionError:
            pass  # the client closed the connection: what the test waits for
        writer.close()

    return script


def refused_within_bounds(script: Script, sent: list[int]) -> HeadTooLarge:
    """The refusal of one request to ``script``: it must come within 5 s (the request's own
    timeout is 30 s), with the client's Python allocations peaking under 4 MiB and the server
    stopped after a few megabytes (what the loopback socket buffers hold)."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(HeadTooLarge) as refused:
            run(script, "/", timeout_s=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5
    assert peak < 4 << 20, peak
    assert sum(sent) < 64 << 20, sum(sent)
    return refused.value


def test_an_endless_header_value_is_refused_at_the_head_cap_in_bounded_time_and_memory() -> None:
    sent: list[int] = []
    start = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Endless: "
    refusal = refused_within_bounds(endless(start, sent), sent)
    assert str(refusal) == "the answer's head is longer than 65,536 bytes"


def test_endless_trailer_fields_are_refused_in_bounded_time_and_memory() -> None:
    sent: list[int] = []
    start = answer_head("Transfer-Encoding: chunked") + b"2\r\n{}\r\n0\r\nX-Trailer: "
    refusal = refused_within_bounds(endless(start, sent), sent)
    assert str(refusal) == "the answer's trailer fields are longer than 65,536 bytes"


def test_a_head_of_thousands_of_header_fields_is_refused_past_the_hundredth() -> None:
    flood = answer_head("Content-Length: 2", *(f"X-{n}: v" for n in range(5000))) + b"{}"
    assert len(flood) < MAX_HEAD_BYTES  # small fields: the count refuses it, not the bytes
    with pytest.raises(HeadTooLarge) as refused:
        run(answering(flood), "/")
    assert str(refused.value) == "the answer has more than 100 header fields"
    # A hundred fields, trailer fields included, are read.
    fields = (f"X-{n}: v" for n in range(MAX_HEADER_FIELDS - 2))
    chunked = answer_head("Transfer-Encoding: chunked", *fields) + b"2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n"
    [answer] = run(answering(chunked), "/")
    assert answer.body == b"{}"
    with pytest.raises(HeadTooLarge, match="more than 100 header fields"):
        run(answering(chunked.replace(b"X-T: 1\r\n", b"X-T: 1\r\nX-U: 2\r\n")), "/")


def test_a_head_of_exactly_the_cap_is_read_and_one_a_byte_longer_is_refused() -> None:
    def head_of(size: int) -> bytes:
        start = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: "
        return start + b"p" * (size - len(start) - 4) + b"\r\n\r\n"

    at_cap = head_of(MAX_HEAD_BYTES)
    assert len(at_cap) == MAX_HEAD_BYTES
    # The body shares the head's last write: what follows the head is not counted as head.
    [answer] = run(answering(at_cap + b"{}"), "/")
    assert answer.body == b"{}"
    with pytest.raises(HeadTooLarge, match="longer than 65,536 bytes"):
        run(answering(head_of(MAX_HEAD_BYTES + 1) + b"{}"), "/")
