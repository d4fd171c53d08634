"""The replay upstream (``sandbox.replay``) stands in for the sandbox in the benchmarks' full
syncs and fetch floors: it must answer every request a full sync makes, with the sandbox's own
bytes, however a client spells the request, and speak HTTP/1.1 keep-alive as a server must.

A sandbox at scale small is recorded once (``bench.fetch_floor --record``, as the suite does),
and the replay serves the recording in a process of its own."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import duckdb
import httpx
import pytest

from bench.fetch_floor import floor_run
from ductwork.contract import paths
from ductwork.contract.encoding import quote_sku
from ductwork.settings import HomeSettings, upstream_environment
from ductwork.streams.registry import CONTRACTORS, INDOOR_MODELS, SUBMITTALS
from pipelines.processes import wait_until_answering
from sandbox.local_server import free_socket
from sandbox.recorded_answers import read_recording
from sandbox.replay import Replay, ReplayProtocol
from sandbox.server import SandboxHandle
from tests.conftest import SEED, UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, stop_session
from tests.helpers.raw_http import Answer, get_many, request_bytes, send_and_read, status_of
from warehouse_sql import quote_identifier

ROOT = Path(__file__).parent.parent
# Headers each server writes afresh for every answer: the replay leaves them out.
PER_ANSWER_HEADERS = {"date", "server"}


@dataclass(frozen=True)
class Recorded:
    """The recording of the sandbox: its file and how many requests making it took."""

    path: Path
    requests: int


@pytest.fixture(scope="module")
def sandbox(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of this module's own at scale small (the replay's answers must stay its)."""
    with object_store.sandbox(SEED, "small") as handle:
        yield handle


@pytest.fixture(scope="module")
def recorded(sandbox: SandboxHandle, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Every answer a full sync fetches, recorded from the sandbox as the bench suite does."""
    path = tmp_path_factory.mktemp("replay") / "small.recording"
    before = sandbox.state.stats()["requests"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.fetch_floor", "--url", sandbox.url,
         "--api-key", UPSTREAM_KEY, "--record", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return Recorded(path, sandbox.state.stats()["requests"] - before)


@pytest.fixture(scope="module")
def replay(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m sandbox.replay`` serving the recording on a free loopback port; its URL."""
    log = tmp_path_factory.mktemp("replay-log") / "replay.log"
    # Bound, not listening, until the replay listens on the port too: no one else takes it.
    held = free_socket()
    port = held.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "sandbox.replay", "--recording", str(recorded.path),
             "--port", str(port)],
            cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until_answering(f"{url}/healthz", process, timeout_s=60)
        held.close()
        yield url
    finally:
        held.close()
        stop_session(process, grace_s=10)
    assert process.returncode == 0, log.read_text(errors="replace")


def replay_stats(url: str) -> dict:
    return httpx.get(f"{url}/_replay/stats", timeout=10).json()


def sandbox_and_replay(sandbox: SandboxHandle, replay: str, targets: list[str]) -> list[tuple]:
    """Each target asked of both, sent exactly as written: (target, sandbox's, replay's)."""
    auth = {"Authorization": f"Bearer {UPSTREAM_KEY}"}
    answers = [
        asyncio.run(get_many(url, [request_bytes(url, t, auth) for t in targets], 1))
        for url in (sandbox.url, replay)
    ]
    return list(zip(targets, *answers, strict=True))


def comparable(answer: Answer) -> tuple[int, dict[str, str], bytes]:
    kept = {k: v for k, v in answer.headers.items() if k not in PER_ANSWER_HEADERS}
    return answer.status, kept, answer.body


def test_the_aiohttp_floor_gets_every_answer_from_the_replay_with_the_sandboxs_request_count(
    sandbox: SandboxHandle, replay: str, recorded: Recorded
) -> None:
    before = replay_stats(replay)
    from_replay = asyncio.run(floor_run(replay, UPSTREAM_KEY, client="aiohttp"))
    after = replay_stats(replay)
    asked_before = sandbox.state.stats()["requests"]
    from_sandbox = asyncio.run(floor_run(sandbox.url, UPSTREAM_KEY, client="aiohttp"))
    asked_of_sandbox = sandbox.state.stats()["requests"] - asked_before

    assert after["misses"] - before["misses"] == 0, after["missed"]
    assert after["requests"] - before["requests"] == from_replay.requests
    assert from_replay.requests == from_sandbox.requests == asked_of_sandbox
    assert from_replay.requests == recorded.requests == after["answers"]
    assert from_replay.bytes == from_sandbox.bytes


def test_replayed_answers_are_the_sandboxs_bytes_whatever_the_query_order_or_encoding(
    sandbox: SandboxHandle, replay: str, recorded: Recorded
) -> None:
    first_leads = httpx.get(
        f"{sandbox.url}{paths.LEADS}?count=1000",
        headers={"Authorization": f"Bearer {UPSTREAM_KEY}"},
    ).json()["data"]
    last = first_leads[-1]
    submittals = [
        key.decode()
        for key in read_recording(recorded.path)
        if key.startswith(SUBMITTALS.path.encode() + b"?")
    ]
    assert submittals
    units = paths.unit_path(paths.UNIT_SLUGS[0])
    targets = [
        f"{paths.PRODUCTS_LIST}?count=1000&page=2",
        f"{paths.PRODUCTS_LIST}?page=2&count=1000",
        f"{units}?page=1&count=1000",
        f"{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}?count=1000&page=3",
        f"{paths.LEADS}?count=1000",
        # Cursor pages as aiohttp spells them (':' left as is) and as urlencode does, reordered.
        f"{paths.LEADS}?count=1000&cursorCreatedDate={last['CreatedDate']}&cursorId={last['Id']}",
        f"{paths.LEADS}?"
        + urlencode({"cursorId": last["Id"], "cursorCreatedDate": last["CreatedDate"]})
        + "&count=1000",
        f"{paths.LEADS}/{quote_sku(first_leads[0]['Id'])}",
        CONTRACTORS.path,
        INDOOR_MODELS.path,
    ]
    for key in submittals[:3]:
        path, _, query = key.partition("?")
        targets += [key, f"{path}?{urlencode(list(reversed(parse_qsl(query))))}"]
    before = replay_stats(replay)

    compared = sandbox_and_replay(sandbox, replay, targets)

    for target, from_sandbox, from_replay in compared:
        assert comparable(from_replay) == comparable(from_sandbox), target
    assert replay_stats(replay)["misses"] == before["misses"]


def test_an_unrecorded_request_is_a_404_counted_and_listed_as_a_miss(replay: str) -> None:
    before = replay_stats(replay)

    answer = httpx.get(f"{replay}/products/v2.0/nothing-recorded?count=3")

    assert answer.status_code == 404
    assert answer.json()["target"] == "/products/v2.0/nothing-recorded?count=3"
    after = replay_stats(replay)
    assert after["misses"] == before["misses"] + 1
    assert after["requests"] == before["requests"] + 1
    assert "/products/v2.0/nothing-recorded?count=3" in after["missed"]


class _Wire(asyncio.Transport):
    """The socket end a protocol writes to, holding what it wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def test_pipelined_requests_split_anywhere_are_answered_in_order_until_connection_close() -> None:
    first, second = b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na", b"HTTP/1.1 200 OK\r\n\r\n"
    recorded = {b"/a": first, b"/b?x=1&y=2": second}
    stream = (
        b"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nignored\r\n\r\n"
        b"GET /b?y=2&x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
        b"GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        b"GET /b?x=1&y=2 HTTP/1.1\r\nHost: h\r\n\r\n"  # after the close: never answered
    )
    for size in (1, 2, 3, 7, 50, len(stream)):
        replay = Replay(recorded)
        protocol, wire = ReplayProtocol(replay), _Wire()
        protocol.connection_made(wire)

        for at in range(0, len(stream), size):
            protocol.data_received(stream[at : at + size])

        assert bytes(wire.written) == first + second + first, size
        assert wire.closed, size
        assert (replay.requests, replay.misses) == (3, 0), size


def test_the_replay_process_answers_pipelined_requests_and_closes_when_asked(replay: str) -> None:
    ask = f"GET {CONTRACTORS.path} HTTP/1.1\r\nHost: x\r\n\r\n"
    stream = (ask * 3 + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").encode()

    received = send_and_read(replay, stream, timeout_s=10)  # returns once the replay closed

    answers = received.split(b"HTTP/1.1 ")[1:]
    assert [status_of(b"HTTP/1.1 " + a) for a in answers] == [200, 200, 200, 200]
    assert answers[0] == answers[1] == answers[2]
    assert received.endswith(b'{"status":"ok"}')


def table_contents(warehouse: Path) -> dict[str, tuple]:
    """Each table's row count and, for tables of upstream records, a digest of the records."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = [
            name
            for (name,) in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
        ]
        with_records = {
            name
            for (name,) in con.execute(
                "SELECT table_name FROM information_schema.columns "
                "WHERE table_schema = 'main' AND column_name = 'record'"
            ).fetchall()
        }
        found = {}
        for name in tables:
            table = quote_identifier(name)
            digest = (
                "md5(string_agg(CAST(record AS VARCHAR), chr(10) ORDER BY CAST(record AS VARCHAR)))"
                if name in with_records
                else "NULL"
            )
            found[name] = con.execute(f"SELECT count(*), {digest} FROM {table}").fetchone()
    return found


def test_a_ductwork_sync_against_the_replay_misses_nothing_and_stores_what_the_sandbox_gives(
    sandbox: SandboxHandle,
    replay: str,
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    homes = {"sandbox": tmp_path / "from-sandbox", "replay": tmp_path / "from-replay"}
    before = replay_stats(replay)
    for name, url in (("sandbox", sandbox.url), ("replay", replay)):
        homes[name].mkdir()
        env = {
            **os.environ,
            "DUCTWORK_HOME": str(homes[name]),
            **upstream_environment(
                url, UPSTREAM_KEY, object_store.endpoint_url, object_store.bucket
            ),
        }
        done = ductwork("sync", env=env, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = replay_stats(replay)

    assert after["misses"] - before["misses"] == 0, after["missed"]
    assert after["requests"] - before["requests"] == after["answers"]
    from_sandbox, from_replay = (
        table_contents(HomeSettings(home=homes[name]).warehouse_path)
        for name in ("sandbox", "replay")
    )
    assert from_replay == from_sandbox
    assert from_replay["lead_details"][0] == sandbox.state.stats()["leads"]
    assert from_replay["digital_assets"][0] == sandbox.state.stats()["assets"]
