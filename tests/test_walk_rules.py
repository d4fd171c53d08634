"""The walks' rules against a real sandbox switched to hostile: a lead list that ignores its
cursor, page-number lists that ignore ``page`` and report a billion pages, and gzip bombs.
Each walk is refused at the first page that breaks a rule, after a bounded number of requests,
with one line naming the path and the rule; the same walks over the honest sandbox, its data
changing while they page, pass."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import httpx
import pytest

from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS, PRODUCTS_LIST
from ductwork.streams.crm import LEAD_PAGING
from ductwork.streams.data_warehouse import DIGITAL_ASSET_PAGING
from ductwork.streams.registry import PAIRINGS
from ductwork.upstream.client import UpstreamClient, UpstreamContractError
from ductwork.upstream.cursor_walk import Cursor, walk_cursor
from ductwork.upstream.list_reader import MAX_LIST_RECORDS, read_whole_list
from ductwork.upstream.updated_after_walk import Key, PageWalkProgress, keyset_walk, page_walk
from sandbox.fault_settings import Faults
from sandbox.faults import FLOOD_FIELDS
from sandbox.gzip_bomb import INFLATED_PADDING
from sandbox.server import SandboxHandle, running_sandbox
from tests.helpers.cli import ROOT, free_ports
from tests.helpers.raw_http import headers_of, request_bytes, send_and_read

T = TypeVar("T")
LEADS_ON_TINY = 2_000
ASSETS_ON_TINY = 3_000
PRODUCTS_ON_TINY = 400
# A page walk fetches at most this many pages ahead of the one it checks (two per connection).
CONCURRENCY = 4
WINDOW = 2 * CONCURRENCY


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxHandle]:
    with running_sandbox(seed=44, scale="tiny", api_key="walk-rules-key") as handle:
        yield handle


@pytest.fixture
def upstream(sandbox: SandboxHandle) -> Iterator[SandboxHandle]:
    """The module's sandbox, its switches off again after each test."""
    yield sandbox
    sandbox.state.faults = Faults()


def walk(
    upstream: SandboxHandle, read: Callable[[UpstreamClient], Awaitable[T]], **options: int
) -> tuple[T, UpstreamClient]:
    """Run ``read`` on a fresh client of the sandbox; its result and the client (its stats)."""

    async def run() -> tuple[T, UpstreamClient]:
        async with UpstreamClient(
            upstream.url, upstream.api_key, concurrency=CONCURRENCY, **options
        ) as client:
            return await read(client), client

    return asyncio.run(run())


def refused(
    upstream: SandboxHandle, read: Callable[[UpstreamClient], Awaitable[object]], **options: int
) -> tuple[str, int]:
    """The one-line refusal ``read`` ends in, and how many requests it sent before."""
    client = UpstreamClient(upstream.url, upstream.api_key, concurrency=CONCURRENCY, **options)

    async def run() -> None:
        async with client:
            await read(client)

    with pytest.raises(UpstreamContractError) as caught:
        asyncio.run(run())
    message = str(caught.value)
    assert "\n" not in message
    assert upstream.api_key not in message
    return message, client.stats.requests


class Pages:
    """A sink that keeps what each page handed it."""

    def __init__(self) -> None:
        self.pages: list[list[dict]] = []

    async def leads(self, leads: list[dict], _cursor: Cursor) -> None:
        self.pages.append(leads)

    async def assets(self, fresh: list[dict], _listed: list[str], _p: PageWalkProgress) -> None:
        self.pages.append(fresh)

    async def keyset(self, fresh: list[dict], _resume_at: Key | None) -> None:
        self.pages.append(fresh)

    @property
    def records(self) -> int:
        return sum(len(page) for page in self.pages)


def test_a_lead_list_that_ignores_its_cursor_is_refused_at_the_first_page_after_one(
    upstream: SandboxHandle,
) -> None:
    upstream.state.faults = Faults(loop_cursor=True)
    sink = Pages()
    message, requests = refused(
        upstream, lambda client: walk_cursor(client, LEAD_PAGING, sink.leads)
    )
    assert message.startswith(f"GET {LEADS}: refused, the cursor does not move forward")
    assert requests == 2  # the first page, then the first page again instead of the second
    assert [len(page) for page in sink.pages] == [1000]

    # Resumed from a committed cursor, the very first answer is refused: nothing is stored.
    after = LEAD_PAGING.cursor_of(sink.pages[0][-1])
    sink = Pages()
    message, requests = refused(
        upstream, lambda client: walk_cursor(client, LEAD_PAGING, sink.leads, after=after)
    )
    assert f"asked for leads after ({after[0]}, {after[1]})" in message
    assert requests == 1
    assert sink.pages == []


def test_the_lead_walk_that_honours_its_cursor_reads_every_lead_once(
    upstream: SandboxHandle,
) -> None:
    sink = Pages()
    report, client = walk(upstream, lambda client: walk_cursor(client, LEAD_PAGING, sink.leads))
    ids = [lead["Id"] for page in sink.pages for lead in page]
    assert len(ids) == len(set(ids)) == LEADS_ON_TINY == report.records
    assert client.stats.requests == 3


def test_a_page_walk_over_a_list_that_ignores_page_is_refused_at_the_repeated_page(
    upstream: SandboxHandle,
) -> None:
    upstream.state.faults = Faults(endless_pages=True)
    sink = Pages()
    message, requests = refused(
        upstream,
        lambda client: page_walk(client, DIGITAL_ASSET_PAGING, PageWalkProgress(None), sink.assets),
    )
    assert message == (
        f"GET {DATA_WAREHOUSE_DIGITAL_ASSETS}: refused, page 2 repeats page 1 "
        "(the upstream ignores page?)"
    )
    assert [len(page) for page in sink.pages] == [1000]  # only the first page reached the sink
    assert requests <= 1 + WINDOW


def test_a_page_walk_whose_totals_promise_records_its_page_lacks_is_refused_on_that_page(
    upstream: SandboxHandle,
) -> None:
    newest = DIGITAL_ASSET_PAGING.key_of({"updatedAt": "2999-01-01T00:00:00.000Z", "assetId": "~"})
    upstream.state.faults = Faults(endless_pages=True)
    sink = Pages()
    message, requests = refused(
        upstream,
        lambda client: page_walk(
            client, DIGITAL_ASSET_PAGING, PageWalkProgress(newest), sink.assets
        ),
    )
    assert message == (
        f"GET {DATA_WAREHOUSE_DIGITAL_ASSETS}: refused, page 1 of 1,000,000,000 holds 0 records; "
        "a page before the last holds count (1000)"
    )
    assert requests == 1
    assert sink.pages == []


def test_a_keyset_walk_over_a_list_reporting_a_billion_pages_is_refused(
    upstream: SandboxHandle,
) -> None:
    upstream.state.faults = Faults(endless_pages=True)
    sink = Pages()
    message, requests = refused(
        upstream, lambda client: keyset_walk(client, DIGITAL_ASSET_PAGING, None, sink.keyset)
    )
    assert message.startswith(
        f"GET {DATA_WAREHOUSE_DIGITAL_ASSETS}: refused, page 1 of 1,000,000,000"
    )
    # Each query moved up to the resume point; the last one, short of a page, was refused.
    assert sink.records < ASSETS_ON_TINY
    assert requests <= ASSETS_ON_TINY // 1000 + 1


def test_a_whole_list_read_of_a_list_reporting_a_billion_pages_stops_at_its_first_page(
    upstream: SandboxHandle,
) -> None:
    upstream.state.faults = Faults(endless_pages=True)
    # A full first page agrees with its totals; the total alone is more than a read may hold.
    message, requests = refused(
        upstream,
        lambda client: read_whole_list(
            client, DATA_WAREHOUSE_DIGITAL_ASSETS, lambda r: r["assetId"]
        ),
    )
    assert message == (
        f"GET {DATA_WAREHOUSE_DIGITAL_ASSETS}: refused, page 1 reports 1,000,000,000,000 items; a "
        f"whole-list read holds at most {MAX_LIST_RECORDS:,}"
    )
    assert requests == 1
    # The tiny catalog's 400 products on a page that claims to be followed by more.
    message, requests = refused(
        upstream, lambda client: read_whole_list(client, PRODUCTS_LIST, lambda r: r["sku"])
    )
    assert message == (
        f"GET {PRODUCTS_LIST}: refused, page 1 of 1,000,000,000 holds {PRODUCTS_ON_TINY} "
        "records; a page before the last holds count (1000)"
    )
    assert requests == 1


def test_walks_over_the_honest_sandbox_pass_the_rules_while_its_data_changes_under_them(
    upstream: SandboxHandle,
) -> None:
    # Every fourth request changes the data: assets move to the end, appear and vanish, and
    # products change, between the pages of one walk. Each answer agrees with itself.
    churn = {"assets_updated": 40, "assets_added": 20, "assets_deleted": 10, "products_changed": 5}
    upstream.state.faults = Faults(mutate_every=4, mutation=churn)
    sink = Pages()
    report, _ = walk(
        upstream,
        lambda client: page_walk(client, DIGITAL_ASSET_PAGING, PageWalkProgress(None), sink.assets),
    )
    assert report.pages >= ASSETS_ON_TINY // 1000
    keyset, _ = walk(
        upstream, lambda client: keyset_walk(client, DIGITAL_ASSET_PAGING, None, Pages().keyset)
    )
    assert keyset.records > ASSETS_ON_TINY // 2
    products, _ = walk(
        upstream, lambda client: read_whole_list(client, PRODUCTS_LIST, lambda r: r["sku"])
    )
    assert len(products.records) == products.reported_total >= PRODUCTS_ON_TINY
    pairings, _ = walk(
        upstream,
        lambda client: read_whole_list(client, PAIRINGS.path, lambda r: r["relationshipId"]),
    )
    assert len(pairings.records) == pairings.reported_total > 0


def test_a_gzip_bomb_is_refused_at_the_cap_once_without_inflating_the_rest(
    upstream: SandboxHandle,
) -> None:
    cap = 8 << 20
    upstream.state.faults = Faults(gzip_bomb=True)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    message, requests = refused(
        upstream, lambda client: client.get_json(PRODUCTS_LIST), max_body_bytes=cap
    )
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert message == (
        f"GET {PRODUCTS_LIST}: refused, the body is larger than 8,388,608 bytes after "
        "decompression (DUCTWORK_UPSTREAM_MAX_BODY_BYTES)"
    )
    assert requests == 1  # a refusal is not retried
    # The body would inflate to more than a gigabyte; reading stopped near the cap.
    assert INFLATED_PADDING >= 1 << 30
    assert grew * 1024 < 256 << 20


def test_the_sandbox_command_takes_each_hostile_switch_as_a_flag() -> None:
    (port,) = free_ports(1)
    key = "sandbox-flags-key"
    command = ["sandbox", "--port", str(port), "--scale", "tiny", "--api-key", key]
    flags = ["--loop-cursor", "--endless-pages", "--gzip-bomb", "--header-flood"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *command, *flags],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        for line in process.stdout:  # ends when the process does
            if line.startswith("sandbox: serving on"):
                break
        url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}
        faults = httpx.get(f"{url}/_sandbox/faults", headers=auth, timeout=30).json()
        switches = ("loop_cursor", "endless_pages", "gzip_bomb", "header_flood")
        assert {name: faults[name] for name in switches} == dict.fromkeys(switches, True)
        # An answer sent as a bomb (about a megabyte on the wire, a gigabyte inflated) behind
        # thousands of header fields, more than an HTTP client library reads: read raw.
        request = request_bytes(url, PAIRINGS.path, {**auth, "Connection": "close"})
        headers = headers_of(send_and_read(url, request, timeout_s=30))
        assert headers["content-encoding"] == "gzip"
        assert 1_000_000 <= int(headers["content-length"]) < 4_000_000
        assert sum(name.startswith("x-flood-") for name in headers) == FLOOD_FIELDS
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
