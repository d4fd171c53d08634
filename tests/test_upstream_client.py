"""The upstream client against real loopback servers that misbehave on purpose."""

from __future__ import annotations

import asyncio
import signal
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from ductwork.contract.encoding import dumps, loads
from ductwork.stop_signals import WatchStopSignals
from ductwork.upstream.client import (
    RetryRules,
    UpstreamAuthError,
    UpstreamClient,
    UpstreamContractError,
    UpstreamError,
)
from ductwork.upstream.list_reader import digest_known_pages, read_whole_list
from sandbox.local_server import HOST, serving

SECRET = "sk-test-do-not-leak-4711"
Script = Callable[[int, dict], tuple[int, dict[str, str], bytes] | None]


class ScriptedUpstream:
    """An ASGI app answering the n-th request as its script says; None means drop it."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.seen: list[tuple[float, str, dict[str, str]]] = []

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append((time.monotonic(), scope["path"], headers))
        answer = self.script(len(self.seen), scope)
        if answer is None:  # a response cut short: headers promise more than is sent
            start = {"type": "http.response.start", "status": 200,
                     "headers": [(b"content-length", b"1000")]}  # fmt: skip
            await send(start)
            await send({"type": "http.response.body", "body": b'{"partial', "more_body": True})
            raise ConnectionAbortedError("dropped on purpose")
        status, extra, body = answer
        raw_headers = [(b"content-type", b"application/json")]
        raw_headers += [(k.encode(), v.encode()) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body})


def fetch(url: str, path: str = "/x", **kwargs: object) -> tuple[object, UpstreamClient]:
    rules = RetryRules(max_retries=4, backoff_base_s=0.01, backoff_cap_s=0.05)

    async def run() -> tuple[object, UpstreamClient]:
        async with UpstreamClient(url, SECRET, rules=rules, seed=1, **kwargs) as client:
            return await client.get_json(path), client

    return asyncio.run(run())


OK = (200, {}, dumps({"ok": True}))


def test_client_retries_server_errors_and_dropped_connections_then_succeeds() -> None:
    plan = {1: (503, {}, b"{}"), 2: None, 3: (502, {}, b"{}")}
    upstream = ScriptedUpstream(lambda n, _: plan.get(n, OK))
    with serving(upstream) as url:
        body, client = fetch(url)
    assert body == {"ok": True}
    assert client.stats.requests == 4
    assert client.stats.retries == 3
    assert client.stats.server_errors == 2
    assert client.stats.dropped_connections == 1


def test_a_noted_stop_signal_stops_the_client_before_its_next_request() -> None:
    # A run's own interrupt can be lost (Python only prints one raised in a weakref callback);
    # the client then stops at its next request instead of fetching on.
    upstream = ScriptedUpstream(lambda n, _: OK)
    with serving(upstream) as url, WatchStopSignals():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)  # the watch's own interrupt, caught here
        with pytest.raises(KeyboardInterrupt):
            fetch(url)
    assert upstream.seen == []


def test_client_waits_at_least_retry_after_on_429() -> None:
    plan = {1: (429, {"Retry-After": "1"}, b"{}")}
    upstream = ScriptedUpstream(lambda n, _: plan.get(n, OK))
    with serving(upstream) as url:
        body, client = fetch(url)
    assert body == {"ok": True}
    assert client.stats.rate_limited == 1
    first, second = upstream.seen[0][0], upstream.seen[1][0]
    assert second - first >= 1.0


def test_client_fails_at_once_on_401_without_revealing_the_key() -> None:
    upstream = ScriptedUpstream(lambda n, _: (401, {"WWW-Authenticate": "Bearer"}, b"{}"))
    with serving(upstream) as url, pytest.raises(UpstreamAuthError) as caught:
        fetch(url)
    assert len(upstream.seen) == 1
    assert "401" in str(caught.value)
    assert "DUCTWORK_UPSTREAM_API_KEY" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_client_sends_the_bearer_key_in_the_authorization_header() -> None:
    upstream = ScriptedUpstream(lambda n, _: OK)
    with serving(upstream) as url:
        fetch(url)
    assert upstream.seen[0][2]["authorization"] == f"Bearer {SECRET}"


def test_client_gives_up_after_its_retry_budget_with_a_clear_error() -> None:
    upstream = ScriptedUpstream(lambda n, _: (500, {}, b"{}"))
    with serving(upstream) as url, pytest.raises(UpstreamError, match="gave up after 5"):
        fetch(url)
    assert len(upstream.seen) == 5


def test_client_keeps_at_most_its_concurrency_in_flight() -> None:
    in_flight = {"now": 0, "peak": 0}

    async def slow_app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        await asyncio.sleep(0.02)
        in_flight["now"] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def burst(url: str) -> None:
        async with UpstreamClient(url, SECRET, concurrency=3) as client:
            await asyncio.gather(*(client.get_json("/x") for _ in range(30)))

    with serving(slow_app) as url:
        asyncio.run(burst(url))
    assert in_flight["peak"] == 3


def test_pages_after_the_first_are_fetched_and_yielded_in_order() -> None:
    def page_of(n: int, scope: dict) -> tuple[int, dict[str, str], bytes]:
        query = dict(part.split("=") for part in scope["query_string"].decode().split("&"))
        page = int(query["page"])
        body = {"data": [page], "pagination": {"page": page, "totalItems": 7, "totalPages": 7}}
        return 200, {}, dumps(body)

    async def walk(url: str) -> list[int]:
        async with UpstreamClient(url, SECRET, concurrency=4) as client:
            return [body["data"][0] async for body in client.iter_pages("/list", count=1)]

    with serving(ScriptedUpstream(page_of)) as url:
        assert asyncio.run(walk(url)) == [1, 2, 3, 4, 5, 6, 7]


# Records per page of the three-page list below.
PER_PAGE = 3


def _three_page_list(missing: int | None = None) -> Script:
    """A list of three pages of three (records 1..3 on page 1, and so on), for ``count=3``;
    page ``missing`` answers 404."""

    def page_of(n: int, scope: dict) -> tuple[int, dict[str, str], bytes]:
        query = dict(part.split("=") for part in scope["query_string"].decode().split("&"))
        page = int(query["page"])
        if page == missing:
            return 404, {}, dumps({"success": False, "data": None, "errors": []})
        records = [{"sku": f"S{i}"} for i in range(3 * page - 2, 3 * page + 1)] if page <= 3 else []
        pagination = {"page": page, "count": PER_PAGE, "totalItems": 9, "totalPages": 3}
        return 200, {}, dumps({"success": True, "data": records, "pagination": pagination})

    return page_of


def test_a_probe_matches_a_stored_read_only_with_every_page_of_it_unchanged() -> None:
    async def probe(url: str) -> tuple[str, dict[int, str | None]]:
        async with UpstreamClient(url, SECRET, concurrency=2) as client:
            read = await read_whole_list(
                client, "/list", lambda record: record["sku"], count=PER_PAGE
            )
            assert read.pages == 3 and len(read.records) == 9
            return read.digest, {
                pages: await digest_known_pages(client, "/list", pages, count=PER_PAGE)
                for pages in (2, 3, 4)
            }

    with serving(ScriptedUpstream(_three_page_list())) as url:
        stored, probed = asyncio.run(probe(url))
    assert probed[3] == stored
    assert probed[2] != stored and probed[4] != stored  # fewer pages, or one past the end

    async def probe_missing(url: str) -> str | None:
        async with UpstreamClient(url, SECRET) as client:
            return await digest_known_pages(client, "/list", 3, count=PER_PAGE)

    with serving(ScriptedUpstream(_three_page_list(missing=3))) as url:
        assert asyncio.run(probe_missing(url)) is None  # a page gone: the list must be read


def test_reads_sharing_a_client_each_count_their_own_requests() -> None:
    upstream = ScriptedUpstream(_three_page_list())

    async def both(url: str) -> tuple[int, int, int]:
        async with UpstreamClient(url, SECRET, concurrency=2) as client:
            first, second = client.counted_apart(), client.counted_apart()
            await asyncio.gather(
                digest_known_pages(first, "/list", 3), digest_known_pages(second, "/list", 1)
            )
            return first.stats.requests, second.stats.requests, client.stats.requests

    with serving(upstream) as url:
        assert asyncio.run(both(url)) == (3, 1, 0)
    assert len(upstream.seen) == 4


def test_a_list_whose_records_never_match_its_reported_total_is_refused() -> None:
    def short_by_one(n: int, scope: dict) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = _three_page_list()(n, scope)
        document = loads(body)
        if document["pagination"]["page"] == 3:
            document["data"][-1] = {"sku": "S1"}  # nine listed, eight distinct
        return status, headers, dumps(document)

    async def read(url: str) -> None:
        async with UpstreamClient(url, SECRET) as client:
            await read_whole_list(
                client, "/list", lambda record: record["sku"], max_attempts=2, count=PER_PAGE
            )

    upstream = ScriptedUpstream(short_by_one)
    with serving(upstream) as url, pytest.raises(UpstreamError, match="nothing was written"):
        asyncio.run(read(url))
    assert len(upstream.seen) == 6  # both attempts read every page


def test_a_list_whose_total_pages_contradict_its_total_items_is_refused_at_its_first_page() -> None:
    def a_billion_pages(n: int, scope: dict) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = _three_page_list()(n, scope)
        document = loads(body)
        document["pagination"]["totalPages"] = 1_000_000_000
        return status, headers, dumps(document)

    async def walk(url: str) -> None:
        async with UpstreamClient(url, SECRET) as client:
            async for _ in client.iter_pages("/list", count=PER_PAGE):
                pass

    upstream = ScriptedUpstream(a_billion_pages)
    with serving(upstream) as url, pytest.raises(UpstreamContractError) as caught:
        asyncio.run(walk(url))
    assert str(caught.value) == (
        "GET /list: refused, page 1 reports totalPages 1,000,000,000, but totalItems 9 at "
        "count 3 make 3 pages"
    )
    assert len(upstream.seen) == 1


def test_a_body_over_the_cap_is_refused_without_a_retry_and_one_at_the_cap_is_read() -> None:
    cap = 1 << 20
    # JSON either way: whitespace before a value is allowed.
    bodies = {"/at": b" " * (cap - 2) + b"{}", "/over": b" " * (cap - 1) + b"{}"}
    upstream = ScriptedUpstream(lambda n, scope: (200, {}, bodies[scope["path"]]))
    with serving(upstream) as url:
        body, _ = fetch(url, "/at", max_body_bytes=cap)
        assert body == {}
        with pytest.raises(UpstreamContractError) as caught:
            fetch(url, "/over", max_body_bytes=cap)
    assert str(caught.value) == (
        "GET /over: refused, the body is larger than 1,048,576 bytes after decompression "
        "(DUCTWORK_UPSTREAM_MAX_BODY_BYTES)"
    )
    assert [path for _, path, _ in upstream.seen] == ["/at", "/over"]


def test_an_answer_that_never_comes_is_given_up_at_the_timeout_and_retried() -> None:
    calls: list[float] = []

    async def stalls_once(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        calls.append(time.monotonic())
        if len(calls) == 1:
            # No answer at all: held until the client gives up and drops the connection.
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": OK[2]})

    with serving(stalls_once) as url:
        document, client = fetch(url, timeout_s=0.5)
    assert document == {"ok": True}
    assert isinstance(client, UpstreamClient)
    assert (client.stats.requests, client.stats.dropped_connections) == (2, 1)
    assert calls[1] - calls[0] >= 0.5  # the retry came after the timeout, not before


def test_thousands_of_header_fields_are_refused_without_a_retry() -> None:
    flood = {f"X-Field-{n}": "v" for n in range(5000)}
    upstream = ScriptedUpstream(lambda n, scope: (200, flood, b"{}"))
    with serving(upstream) as url, pytest.raises(UpstreamContractError) as caught:
        fetch(url, "/flood")
    assert str(caught.value) == "GET /flood: refused, the answer has more than 100 header fields"
    assert len(upstream.seen) == 1


class _EndlessHeader(socketserver.BaseRequestHandler):
    """Answers a request with a header field whose value never ends, until the client closes
    the connection (or a gigabyte has gone)."""

    sent: list[int]
    requests: list[float]

    def handle(self) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            received += chunk
        self.requests.append(time.monotonic())
        more = b"a" * 65536
        try:
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Endless: ")
            while sum(self.sent) < 1 << 30:
                self.request.sendall(more)
                self.sent.append(len(more))
        except OSError:
            pass  # the client closed the connection


@contextmanager
def endless_header_server(sent: list[int], requests: list[float]) -> Iterator[str]:
    """A plain socket server on a free loopback port that sends an endless header value; yields
    its URL. ``sent`` collects the size of each write it got through, ``requests`` when each
    request came."""
    handler = type("Handler", (_EndlessHeader,), {"sent": sent, "requests": requests})
    with socketserver.ThreadingTCPServer((HOST, 0), handler) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://{HOST}:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(10)


def test_an_endless_header_value_is_refused_once_in_bounded_time() -> None:
    sent: list[int] = []
    requests: list[float] = []
    started = time.monotonic()
    with (
        endless_header_server(sent, requests) as url,
        pytest.raises(UpstreamContractError) as caught,
    ):
        fetch(url, "/endless", timeout_s=30.0)
    assert time.monotonic() - started < 5  # refused long before the request's timeout
    assert str(caught.value) == (
        "GET /endless: refused, the answer's head is longer than 65,536 bytes"
    )
    # The server stopped once the client closed: what the loopback socket buffers held, no more.
    assert sum(sent) < 64 << 20, sum(sent)
    assert len(requests) == 1  # a refusal is not retried
