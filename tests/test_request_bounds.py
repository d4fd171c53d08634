"""What one client can make ``ductwork serve`` hold: request heads are bounded in size and in
time, and padded queries cannot fill the gzip cache. Raw sockets against the server as
operators start it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ductwork.contract import paths
from ductwork.contract.errors import PROBLEM_JSON
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from serve.request_heads import HEAD_LIMIT_BYTES
from tests.conftest import home_with_published_snapshot
from tests.helpers.raw_http import (
    address_of,
    get_many,
    headers_of,
    request_bytes,
    seconds_until_closed,
    send_and_read,
    session_rss_bytes,
    status_of,
)
from tests.helpers.serve_process import RunningApi, serving_process

HEAD_TIMEOUT_S = 2.0
ANSWER_LIMIT_S = 30.0
PADDED_QUERIES = 12_000
PADDING = 12_000  # characters of an unknown parameter's value: a request line under the limit
GROWTH_LIMIT = 64 << 20
LOAD_LIMIT_S = 240.0


@dataclass(frozen=True)
class Served:
    """``ductwork serve`` (two workers) and a key of every data scope."""

    api: RunningApi
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="module")
def served(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("bounds")
    home_with_published_snapshot(synced_home, home)
    key = KeyFile(HomeSettings(home=home).keys_path).create("bounds", ["all"])
    settings = {"DUCTWORK_SERVE_HEAD_TIMEOUT_S": str(HEAD_TIMEOUT_S)}
    with serving_process(home, 2, settings) as api:
        yield Served(api, key)


def still_answers(served: Served) -> None:
    """A normal request on a new connection is answered 200."""
    target = f"{paths.PRODUCTS_LIST}?count=1"
    answer = send_and_read(
        served.api.url,
        request_bytes(served.api.url, target, {**served.auth, "Connection": "close"}),
        ANSWER_LIMIT_S,
    )
    assert status_of(answer) == 200, answer[:300]


def test_a_4_mib_request_line_is_refused_with_414_in_the_familys_style(served: Served) -> None:
    target = f"{paths.PRODUCTS_LIST}?count=1&pad=" + "x" * (4 << 20)
    answer = send_and_read(
        served.api.url, request_bytes(served.api.url, target, served.auth), ANSWER_LIMIT_S
    )
    assert status_of(answer) == 414, answer[:300]
    headers = headers_of(answer)
    assert headers["connection"] == "close"
    assert headers["x-content-type-options"] == "nosniff"
    body = answer.split(b"\r\n\r\n", 1)[1]
    assert b'"code":"URI_TOO_LONG"' in body and b'"success":false' in body  # products style
    still_answers(served)


def test_a_20_kib_header_block_is_refused_with_a_431_problem(served: Served) -> None:
    headers = {**served.auth, **{f"X-Filler-{n}": "y" * 1000 for n in range(20)}}
    answer = send_and_read(
        served.api.url,
        request_bytes(served.api.url, f"{paths.LEADS}?count=1", headers),
        ANSWER_LIMIT_S,
    )
    assert status_of(answer) == 431, answer[:300]
    assert headers_of(answer)["content-type"] == PROBLEM_JSON
    assert b'"type":"/problems/headers-too-large"' in answer
    still_answers(served)


def test_a_head_just_under_the_limit_is_answered(served: Served) -> None:
    headers = {**served.auth, "Connection": "close"}
    bare = request_bytes(served.api.url, f"{paths.PRODUCTS_LIST}?count=1&pad=", headers)
    target = f"{paths.PRODUCTS_LIST}?count=1&pad=" + "x" * (HEAD_LIMIT_BYTES - len(bare) - 1)
    request = request_bytes(served.api.url, target, headers)
    assert HEAD_LIMIT_BYTES - 64 < len(request) <= HEAD_LIMIT_BYTES
    assert status_of(send_and_read(served.api.url, request, ANSWER_LIMIT_S)) == 200


def test_a_connection_that_sends_nothing_is_closed_after_the_head_timeout(served: Served) -> None:
    waited = seconds_until_closed(served.api.url, b"", b"", limit_s=HEAD_TIMEOUT_S + 10)
    assert HEAD_TIMEOUT_S - 0.5 <= waited <= HEAD_TIMEOUT_S + 3, waited
    still_answers(served)


def test_a_head_sent_a_byte_at_a_time_is_cut_off_at_the_head_timeout(served: Served) -> None:
    start = f"GET {paths.PRODUCTS_LIST} HTTP/1.1\r\nX-Slow: ".encode()
    waited = seconds_until_closed(served.api.url, start, b"z", limit_s=HEAD_TIMEOUT_S + 10)
    assert HEAD_TIMEOUT_S - 0.5 <= waited <= HEAD_TIMEOUT_S + 3, waited


def test_an_idle_keep_alive_connection_is_closed_after_its_answer(served: Served) -> None:
    request = request_bytes(served.api.url, f"{paths.PRODUCTS_LIST}?count=1", served.auth)
    waited = seconds_until_closed(served.api.url, request, b"", limit_s=HEAD_TIMEOUT_S + 10)
    assert waited <= HEAD_TIMEOUT_S + 3, waited


def test_a_second_head_gets_the_whole_timeout_from_the_first_answer(served: Served) -> None:
    """The first head trickles in for most of the timeout; the second, never finished, is cut
    off a whole timeout after the first answer, not a timeout after the connection opened."""
    request = request_bytes(served.api.url, f"{paths.PRODUCTS_LIST}?count=1", served.auth)
    answered_after, closed_after = asyncio.run(_two_heads(served.api.url, request))
    assert answered_after >= 0.5 * HEAD_TIMEOUT_S, answered_after
    assert HEAD_TIMEOUT_S - 0.3 <= closed_after <= HEAD_TIMEOUT_S + 3, closed_after


async def _two_heads(url: str, request: bytes) -> tuple[float, float]:
    """Seconds from opening to the first answer, and from that answer to the close, for a
    connection whose first head comes in four pieces a fifth of the timeout apart and whose
    second head is begun and never finished."""
    reader, writer = await asyncio.open_connection(*address_of(url))
    try:
        opened = asyncio.get_running_loop().time()
        quarter = len(request) // 4
        pieces = [request[:quarter], request[quarter : 2 * quarter],
                  request[2 * quarter : 3 * quarter], request[3 * quarter :]]  # fmt: skip
        for number, piece in enumerate(pieces):
            if number:
                # The client's own pace, the behaviour under test: no answer can come yet.
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(reader.read(1), 0.2 * HEAD_TIMEOUT_S)
            writer.write(piece)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), ANSWER_LIMIT_S)
        await reader.readexactly(int(headers_of(head)["content-length"]))
        answered = asyncio.get_running_loop().time()
        writer.write(f"GET {paths.PRODUCTS_LIST} HTTP/1.1\r\nX-Never: ".encode())
        rest = await asyncio.wait_for(reader.read(), HEAD_TIMEOUT_S + 10)
        assert rest == b"", rest[:200]  # closed without an answer
        return answered - opened, asyncio.get_running_loop().time() - answered
    finally:
        writer.close()


def test_padded_gzip_queries_grow_the_servers_memory_by_under_64_mib(served: Served) -> None:
    url = served.api.url
    zipped = {**served.auth, "Accept-Encoding": "gzip"}
    page = f"{paths.PRODUCTS_LIST}?count=10"
    # Warm up the same routes with short unknown parameters, then measure.
    warm = [request_bytes(url, f"{page}&w={n}", zipped) for n in range(1_000)]
    padded = [
        request_bytes(url, f"{page}&pad{n}=" + "x" * PADDING, zipped) for n in range(PADDED_QUERIES)
    ]

    async def load() -> tuple[list, int, list]:
        warmed = await get_many(url, warm, connections=4)
        before = session_rss_bytes(served.api.process.pid)
        answers = await get_many(url, padded, connections=4)
        return warmed, before, answers

    warmed, before, answers = asyncio.run(asyncio.wait_for(load(), LOAD_LIMIT_S))
    after = session_rss_bytes(served.api.process.pid)
    assert len(answers) == PADDED_QUERIES and len(warmed) == len(warm)
    assert {answer.status for answer in answers} == {200}
    assert {answer.headers.get("content-encoding") for answer in answers} == {"gzip"}
    growth = after - before
    print(f"RSS of the server's processes: {before >> 20} MiB, then {growth / 2**20:+.1f} MiB")
    assert growth < GROWTH_LIMIT, f"grew by {growth / 2**20:.1f} MiB (before {before >> 20} MiB)"
