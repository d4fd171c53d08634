"""What every API-ingest asset shares: running a read, failing clearly, reporting its cost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import dagster as dg

from assets.interrupts import stops_on_interrupt
from assets.resources import UpstreamResource
from ductwork.contract.encoding import parse_received_datetime
from ductwork.upstream.client import (
    RequestStats,
    UpstreamAuthError,
    UpstreamClient,
    UpstreamContractError,
)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

# On top of the client's per-request retries: a whole asset retried after a pause.
INGEST_RETRY = dg.RetryPolicy(
    max_retries=2, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.FULL
)
OWNERS = ["team:data-platform"]
# Assets that write the warehouse run one at a time: DuckDB allows a single writer.
WAREHOUSE_POOL = "duckdb_warehouse"


def ingest_asset(
    *, group: str, description: str, kinds: set[str] | None = None, **extra: Any
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``@dg.asset`` with what every ingest asset shares: owners, the warehouse pool (one
    writer at a time) and the retry policy, which an interrupt does not trigger."""
    define = dg.asset(
        group_name=group,
        kinds=kinds or {"api", "duckdb"},
        owners=OWNERS,
        pool=WAREHOUSE_POOL,
        retry_policy=INGEST_RETRY,
        description=description,
        **extra,
    )
    return lambda compute: define(stops_on_interrupt(compute))


@dataclass(frozen=True)
class Fetched(Generic[T]):
    """The result of a read with what it cost."""

    value: T
    stats: RequestStats
    seconds: float

    def after(self, earlier: Fetched[object]) -> Fetched[T]:
        """This read, its cost including an earlier read's that it followed."""
        return Fetched(self.value, earlier.stats + self.stats, earlier.seconds + self.seconds)


def fetch(upstream: UpstreamResource, read: Callable[[UpstreamClient], Awaitable[T]]) -> Fetched[T]:
    """Run an async read against the upstream on a fresh client and event loop.

    A rejected API key, or an upstream that breaks the rules a walk relies on, fails the asset
    at once, without Dagster's retries.
    """
    return fetch_each(upstream, {None: read})[None]


def fetch_each(
    upstream: UpstreamResource, reads: Mapping[K, Callable[[UpstreamClient], Awaitable[T]]]
) -> dict[K, Fetched[T]]:
    """Run several reads at once on one fresh client and event loop, within the client's
    limit on requests in flight; each read reports its own requests and time.

    A rejected API key, or an upstream that breaks the rules a walk relies on, fails the asset
    at once, without Dagster's retries: asking again would get the same answer.
    """
    if not reads:
        return {}

    async def timed(
        client: UpstreamClient, read: Callable[[UpstreamClient], Awaitable[T]]
    ) -> Fetched[T]:
        started = time.perf_counter()
        own = client.counted_apart()
        value = await read(own)
        return Fetched(value, own.stats, time.perf_counter() - started)

    async def run() -> list[Fetched[T]]:
        async with upstream.client() as client:
            return await asyncio.gather(*(timed(client, read) for read in reads.values()))

    try:
        results = asyncio.run(run())
    except (UpstreamAuthError, UpstreamContractError) as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    return dict(zip(reads, results, strict=True))


def run_metadata(fetched: Fetched[object], rows: int, **extra: float | int | str) -> dict:
    """Numeric run metadata: row count, requests, retries, 429s, bytes, duration."""
    return {
        "dagster/row_count": rows,
        **fetched.stats.as_metadata(),
        "duration_s": round(fetched.seconds, 3),
        **extra,
    }


def epoch_seconds(text: str | None) -> float:
    """A watermark as seconds since the epoch, so the UI can plot it; 0.0 when unreadable."""
    try:
        return parse_received_datetime(text).timestamp() if text else 0.0
    except ValueError:
        return 0.0


async def fetch_and_store(
    batches: list[list[Any]],
    fetch_batch: Callable[[list[Any]], Awaitable[T]],
    store_batch: Callable[[T], None],
) -> None:
    """Fetch batch n+1 while batch n is written (in a worker thread), one write at a time."""
    writing: asyncio.Future[None] | None = None
    for batch in batches:
        fetched = await fetch_batch(batch)
        if writing is not None:
            await writing
        writing = asyncio.ensure_future(asyncio.to_thread(store_batch, fetched))
        # Held by the write alone from here: freed as soon as it is stored, not only once the
        # next batch has been fetched (which kept two whole batches in memory at once).
        del fetched
    if writing is not None:
        await writing


class PendingPages(Generic[T]):
    """Pages read but not yet committed, committed together once they hold ``size`` records.

    A transaction per page pays a page's worth of fixed costs (history versioning, the commit)
    for every page; holding several pages per transaction cuts that many times over, and a run
    that stops early still commits what it read: leaving ``async with`` commits the pages still
    held, whether the block ended or raised. ``store`` takes the held pages, oldest first, in a
    worker thread.
    """

    def __init__(self, store: Callable[[list[T]], None], size: int) -> None:
        self._store = store
        self._size = size
        self._pages: list[T] = []
        self._records = 0
        self.committed = False  # whether any pages have been stored yet

    async def __aenter__(self) -> PendingPages[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.commit()

    async def add(self, page: T, records: int) -> None:
        """Hold a page of ``records`` records; commit the held pages once they reach ``size``."""
        self._pages.append(page)
        self._records += records
        if self._records >= self._size:
            await self.commit()

    async def commit(self) -> None:
        """Store the held pages now (nothing when none are held)."""
        if not self._pages:
            return
        pages, self._pages, self._records = self._pages, [], 0
        self.committed = True
        await asyncio.to_thread(self._store, pages)

    def discard(self) -> None:
        """Forget the held pages: leaving the block then stores nothing more."""
        self._pages, self._records = [], 0
