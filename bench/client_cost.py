"""What ductwork's HTTP client costs per request, against bare aiohttp fetching the same.

    uv run --frozen --group bench python -m bench.client_cost [--scale medium] [--chunks 30]
        [--workers-per-slot 1 4]

A reference, with no target. It starts the sandbox (and moto) as the suite does, reads the
lead ids from the lead list, then fetches their details in chunks of 2,000, each chunk once
per way: as the ``crm_lead_details`` step fetches them (``DetailQueue.fetch``, on the
sync's ``UpstreamClient``), and with bare aiohttp: one session, 8 connections, 8 workers,
every body parsed as the sync must (the aiohttp floor discards detail bodies unparsed). The
step's way runs once per number of detail workers per slot that ``--workers-per-slot`` gives
(by default, the step's own ``DETAIL_WORKERS_PER_SLOT``). The ways take turns on every chunk,
in an order reversed every other chunk, so the machine's drift falls on all alike.

The figure is the CPU time of the thread running the event loop: the client is bound by its
own CPU on this path, and CPU time is steadier than wall time on a shared machine. The ratio
compares ductwork's client, on its own pooled connections, with aiohttp's cost per request.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import orjson
from yarl import URL

from bench.launching import ROOT, prepare_children_environment
from bench.upstreams import KEY, start_object_store, upstream
from ductwork.contract.encoding import quote_sku
from ductwork.contract.paths import LEADS
from ductwork.streams.crm import LEAD_PAGING
from ductwork.streams.registry import LEADS as LEAD_STREAM
from ductwork.upstream.bounded_map import map_bounded
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.cursor_walk import Cursor, walk_cursor
from pipelines.processes import ProcessGroup

CHUNK = 2_000
IN_FLIGHT = 8
Fetch = Callable[[list[str]], Awaitable[object]]


async def lead_ids(url: str, most: int) -> list[str]:
    """The first ``most`` lead ids of the lead list, in its order."""
    ids: list[str] = []

    async def take(leads: list[dict], _cursor: Cursor) -> None:
        ids.extend(str(lead["Id"]) for lead in leads)

    async with UpstreamClient(url, KEY, concurrency=IN_FLIGHT) as client:
        await walk_cursor(client, LEAD_PAGING, take)
    return ids[:most]


def bare_aiohttp(session: aiohttp.ClientSession, url: str) -> Fetch:
    """Fetch details with aiohttp alone: a worker per connection, every body parsed."""
    auth = {"Authorization": f"Bearer {KEY}"}

    async def one(lead_id: str) -> object:
        target = URL(f"{url}{LEADS}/{quote_sku(lead_id)}", encoded=True)
        async with session.get(target, headers=auth) as response:
            body = await response.read()
        return orjson.loads(body)

    return lambda ids: map_bounded(one, ids, IN_FLIGHT)


def as_the_step(client: UpstreamClient, workers_per_slot: int) -> Fetch:
    """Fetch details as ``crm_lead_details`` does, with ``workers_per_slot`` workers per slot."""

    details = dataclasses.replace(LEAD_STREAM.steps[1].reader, workers_per_slot=workers_per_slot)
    return lambda ids: details.fetch(client, ids)


async def compare(
    url: str, ids: list[str], chunks: int, workers_per_slot: list[int]
) -> dict[str, list[float]]:
    """CPU seconds of the event loop's thread per chunk, for each way of fetching."""
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with (
        aiohttp.ClientSession(connector=connector, headers={"Accept": "application/json"}) as s,
        UpstreamClient(url, KEY, concurrency=IN_FLIGHT) as client,
    ):
        ways: dict[str, Fetch] = {"bare aiohttp": bare_aiohttp(s, url)}
        for workers in workers_per_slot:
            ways[f"ductwork, {workers} per slot"] = as_the_step(client, workers)
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for n in range(chunks):
            start = (n * CHUNK) % max(1, len(ids) - CHUNK + 1)
            part = ids[start : start + CHUNK]
            order = list(ways.items()) if n % 2 == 0 else list(ways.items())[::-1]
            for name, way in order:
                before = time.thread_time()
                await way(part)
                seconds[name].append(time.thread_time() - before)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--chunks", type=int, default=30, help="chunks of 2,000 details")
    parser.add_argument(
        "--workers-per-slot",
        type=int,
        nargs="+",
        default=[LEAD_STREAM.steps[1].reader.workers_per_slot],
        help="detail workers per request slot, one way each (default: the step's own)",
    )
    options = parser.parse_args()
    os.chdir(ROOT)
    prepare_children_environment()
    with ProcessGroup() as group:
        s3_url = start_object_store(group)
        with upstream(options.scale, group, s3_url) as up:
            ids = asyncio.run(lead_ids(up.url, 10 * CHUNK))
            seconds = asyncio.run(compare(up.url, ids, options.chunks, options.workers_per_slot))
    requests = options.chunks * min(CHUNK, len(ids))
    base = sum(seconds["bare aiohttp"])
    print(f"Lead details at {options.scale}, {options.chunks} chunks, {requests:,} requests "
          "each way (CPU of the event loop's thread):")  # fmt: skip
    print()
    print("| client | CPU s | µs per request | median per chunk, ms | / bare aiohttp |")
    print("| --- | --- | --- | --- | --- |")
    for name, per_chunk in seconds.items():
        total = sum(per_chunk)
        print(
            f"| {name} | {total:.2f} | {total / requests * 1e6:.0f} | "
            f"{statistics.median(per_chunk) * 1000:.0f} | {total / base:.3f} |"
        )


if __name__ == "__main__":
    main()
