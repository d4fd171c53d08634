"""The fetch floors: fetching exactly what a full sync fetches, and nothing else.

Every list page (products, the six unit lists, pairings, digital assets, the lead cursor
chain), the two internal answers, one submittal request per (idu, odu) the catalog implies and
one detail per lead, with the sync's bound on requests in flight (8), bodies parsed only where
the next request depends on them (the catalog, for the submittal requests; the lead pages, for
the details and the cursor; a first page's ``totalPages``) and otherwise discarded. Nothing is
stored, so ``sync / floor`` is what the sync costs beyond fetching. Two clients:

- ``--client aiohttp``: a general-purpose asyncio HTTP client (the sync's own before
  ``ductwork.upstream.http_pool``), the reference the sync's targets are set against;
- ``--client raw`` (the default): ``bench.raw_http``, a minimal asyncio HTTP/1.1 client over 8
  keep-alive connections, the physical limit of these fetches on this machine.

With ``--record FILE`` the raw client's run keeps every answer (status line, headers, body) in a
recording for the replay upstream (``sandbox.replay``), which then answers a full sync alone.

    uv run python -m bench.fetch_floor --url http://127.0.0.1:PORT --api-key KEY [--client aiohttp]
    uv run python -m bench.fetch_floor --url http://127.0.0.1:PORT --api-key KEY --record FILE
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import orjson
from yarl import URL

from bench.raw_http import RawPool
from ductwork.contract import paths
from ductwork.contract.encoding import quote_sku
from ductwork.streams.products import PAIRING_COLUMNS, UNIT_COLUMNS, pairing_row, unit_row_for
from ductwork.streams.registry import CONTRACTORS, INDOOR_MODELS, PAIRINGS, SUBMITTALS
from ductwork.upstream.http_pool import request_target
from ductwork.warehouse.loading import rows_table
from ductwork.warehouse.schema import schema_sql
from sandbox.recorded_answers import RecordingWriter
from warehouse_sql import stream_section

PAGE = 1000
Record = dict[str, Any]


@dataclass
class FloorRun:
    """What one floor run fetched and how long it took."""

    seconds: float
    requests: int
    bytes: int


Transport = Callable[[str, dict[str, Any] | None], Awaitable[tuple[int, bytes]]]
# One queued request: path, query, and the future its body goes to (None: discard it).
Job = tuple[str, dict[str, Any] | None, "asyncio.Future[bytes] | None"]


class _Fetcher:
    """``concurrency`` workers taking requests from one queue: at most that many in flight,
    as in the sync, without a task per request.

    A request whose body is needed (a list page, a cursor page) goes ahead of those whose
    body is discarded (details, submittals), so the walks that produce requests never wait
    behind the requests they produced. An earlier version gave each request a task waiting on
    a semaphore; with a hundred thousand of them waiting, httpx managed about a third of its
    throughput, which measured the script rather than the client.
    """

    def __init__(self, transport: Transport, concurrency: int) -> None:
        self.transport = transport
        self.concurrency = concurrency
        self.queue: asyncio.PriorityQueue[tuple[int, int, Job]] = asyncio.PriorityQueue()
        self.order = itertools.count()
        self.failures: list[BaseException] = []
        self.requests = 0
        self.bytes = 0

    async def _work(self) -> None:
        while True:
            _, _, (path, params, answer) = await self.queue.get()
            try:
                status, body = await self.transport(path, params)
                self.requests += 1
                self.bytes += len(body)
                if status not in (200, 404):
                    raise RuntimeError(f"GET {path}: HTTP {status}")
                if answer is not None:
                    answer.set_result(body)
            except Exception as error:  # handed to whoever waits, or raised at the end
                if answer is None:
                    self.failures.append(error)
                else:
                    answer.set_exception(error)
            finally:
                self.queue.task_done()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        """GET ahead of the discarded requests, and wait for the body."""
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((0, next(self.order), (path, params, answer)))
        return await answer

    def discard(self, path: str, params: dict[str, Any] | None = None) -> None:
        """Queue a GET whose body is dropped."""
        self.queue.put_nowait((1, next(self.order), (path, params, None)))

    async def run(self, *walks: Awaitable[Any]) -> None:
        """Run the walks that queue the requests, then drain the queue; raise a failure."""
        workers = [asyncio.ensure_future(self._work()) for _ in range(self.concurrency)]
        try:
            await asyncio.gather(*walks)
            await self.queue.join()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        if self.failures:
            raise self.failures[0]

    async def all_pages(self, path: str, params: dict[str, Any] | None = None) -> list[Record]:
        """Every record of a page-number list: page 1, then the others concurrently."""
        base = {**(params or {}), "count": PAGE}
        first = orjson.loads(await self.get(path, {**base, "page": 1}))
        pages = _pagination(first).get("totalPages", 1)
        rest = await asyncio.gather(
            *(self.get(path, {**base, "page": n}) for n in range(2, pages + 1))
        )
        return _records(first) + [r for page in rest for r in _records(orjson.loads(page))]


def _pagination(body: Record) -> Record:
    if "pagination" in body:
        return body["pagination"] or {}
    data = body.get("data")
    return (data.get("pagination") or {}) if isinstance(data, dict) else {}


def _records(body: Record) -> list[Record]:
    data = body.get("data")
    return list(data.get("pairings") or []) if isinstance(data, dict) else list(data or [])


def submittal_requests(units: dict[str, list[Record]], pairings: list[Record]) -> list[tuple]:
    """The (idu, odu) requests the catalog implies, derived by the sync's own SQL."""
    con = duckdb.connect()
    con.execute(schema_sql())
    for slug, records in units.items():
        con.register("incoming", rows_table(records, unit_row_for(slug), UNIT_COLUMNS))
        con.execute("INSERT INTO units BY NAME SELECT * FROM incoming")
    con.register("incoming", rows_table(pairings, pairing_row, PAIRING_COLUMNS))
    con.execute("INSERT INTO pairings BY NAME SELECT * FROM incoming")
    (slots,) = PAIRINGS.steps[0].reader.beside(pairings)
    con.register("incoming", slots.rows)
    con.execute("INSERT INTO pairing_products BY NAME SELECT * FROM incoming")
    rows = con.execute(stream_section(SUBMITTALS.sql, "requests")).fetchall()
    con.close()
    return [(idu, odu) for _, idu, odu, _ in rows]


async def _leads_and_details(fetch: _Fetcher) -> None:
    """Walk the lead cursor chain, queueing each page's details as the walk goes on."""
    cursor: tuple[str, str] | None = None
    while True:
        params: dict[str, Any] = {"count": PAGE}
        if cursor is not None:
            params["cursorCreatedDate"], params["cursorId"] = cursor
        body = orjson.loads(await fetch.get(paths.LEADS, params))
        leads = body.get("data") or []
        for lead in leads:
            fetch.discard(f"{paths.LEADS}/{quote_sku(str(lead['Id']))}")
        if len(leads) < PAGE:
            break
        cursor = (str(leads[-1]["CreatedDate"]), str(leads[-1]["Id"]))


async def _catalog_and_submittals(fetch: _Fetcher) -> None:
    lists = await asyncio.gather(
        *(fetch.all_pages(paths.unit_path(slug)) for slug in paths.UNIT_SLUGS),
        fetch.all_pages(PAIRINGS.path),
        fetch.all_pages(paths.PRODUCTS_LIST),
    )
    units = dict(zip(paths.UNIT_SLUGS, lists[: len(paths.UNIT_SLUGS)], strict=True))
    wanted = submittal_requests(units, lists[len(paths.UNIT_SLUGS)])
    for idu, odu in wanted:
        fetch.discard(SUBMITTALS.path, {k: v for k, v in (("idu", idu), ("odu", odu)) if v})


async def _everything(fetch: _Fetcher) -> float:
    started = time.perf_counter()
    fetch.discard(CONTRACTORS.path)
    fetch.discard(INDOOR_MODELS.path)
    await fetch.run(
        _catalog_and_submittals(fetch),
        _leads_and_details(fetch),
        fetch.all_pages(paths.DATA_WAREHOUSE_DIGITAL_ASSETS),
    )
    return time.perf_counter() - started


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}


async def floor_run(url: str, api_key: str, concurrency: int = 8, client: str = "raw") -> FloorRun:
    """One full fetch of everything a full sync fetches, on the raw client or on aiohttp."""
    headers = _headers(api_key)
    if client == "aiohttp":
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

            async def over_aiohttp(path: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
                query = {k: str(v) for k, v in (params or {}).items()}
                target = URL(url + path, encoded=True)
                async with session.get(target, params=query or None) as response:
                    return response.status, await response.read()

            fetch = _Fetcher(over_aiohttp, concurrency)
            seconds = await _everything(fetch)
        return FloorRun(seconds, fetch.requests, fetch.bytes)
    async with RawPool(url, concurrency, headers) as pool:
        fetch = _Fetcher(pool.get, concurrency)
        seconds = await _everything(fetch)
    return FloorRun(seconds, fetch.requests, fetch.bytes)


async def recorded_run(url: str, api_key: str, recording: Path, concurrency: int = 8) -> FloorRun:
    """The raw floor's run, writing each answer to ``recording`` as it arrives (see
    ``sandbox.recorded_answers``)."""
    async with RawPool(url, concurrency, _headers(api_key)) as pool:
        with RecordingWriter(recording) as writer:

            async def keeping(path: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
                target = request_target(path, params)
                status, head, body = await pool.send(pool.head(target))
                writer.add(target, head, body)
                return status, body

            fetch = _Fetcher(keeping, concurrency)
            seconds = await _everything(fetch)
    return FloorRun(seconds, fetch.requests, fetch.bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--client", choices=["raw", "aiohttp"], default="raw")
    parser.add_argument(
        "--record", type=Path, metavar="FILE", help="keep every answer here (raw client only)"
    )
    options = parser.parse_args()
    if options.record is not None:
        if options.client != "raw":
            parser.error("--record runs the raw client")
        recording = recorded_run(options.url, options.api_key, options.record, options.concurrency)
        run = asyncio.run(recording)
    else:
        floor = floor_run(options.url, options.api_key, options.concurrency, options.client)
        run = asyncio.run(floor)
    print(json.dumps(run.__dict__))


if __name__ == "__main__":
    main()
