"""What every step of a sync shares, without Dagster: the run's options, the upstream and the
bucket it reads, the warehouse it writes, and the report it gives back.

The Dagster assets (``assets/``) build a ``SyncContext`` from their resources and turn each
``StepResult`` into a materialization; the readers (``ductwork.sync.*``) do the work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

import duckdb

from ductwork.contract.encoding import parse_received_datetime
from ductwork.upstream.client import RequestStats, UpstreamClient

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class Upstream(Protocol):
    """The upstream service: a fresh client for each read."""

    def client(self) -> UpstreamClient:
        """A client, to be entered with ``async with``."""
        ...


class Bucket(Protocol):
    """The object store's bucket (listed by a stream, and where images are mirrored)."""

    bucket: str

    def api_client(self) -> Any:
        """A botocore S3 client."""
        ...

    def object_url(self, key: str) -> str:
        """The path-style URL of an object."""
        ...


class Mode(StrEnum):
    """How a run reads a stream."""

    INCREMENTAL = "incremental"  # from the stream's resume point on
    RECONCILE = "reconcile"  # a full listing: deletions found, everything re-read


@dataclass(frozen=True)
class RunOptions:
    """What a run asks of a stream: its mode, whether to forget the resume point first, and
    (leads) the days of recent records to read again."""

    mode: Mode = Mode.INCREMENTAL
    reset: bool = False
    window_days: int | None = None

    @property
    def reconcile(self) -> bool:
        """Whether the run lists everything (deletions found, every record re-read)."""
        return self.mode == Mode.RECONCILE


@dataclass
class SyncContext:
    """One step's view of the run: a warehouse connection open for the whole step, the
    upstream, the bucket, the options and a logger."""

    con: duckdb.DuckDBPyConnection
    upstream: Upstream
    options: RunOptions = field(default_factory=RunOptions)
    bucket: Bucket | None = None
    log: Any = None

    def info(self, message: str, *args: object) -> None:
        """Log at INFO where the run shows it (nowhere without a logger)."""
        if self.log is not None:
            self.log.info(message, *args)


@dataclass(frozen=True)
class Fetched(Generic[T]):
    """The result of a read with what it cost."""

    value: T
    stats: RequestStats
    seconds: float

    def after(self, earlier: Fetched[object]) -> Fetched[T]:
        """This read, its cost including an earlier read's that it followed."""
        return Fetched(self.value, earlier.stats + self.stats, earlier.seconds + self.seconds)

    @classmethod
    def nothing(cls, value: T) -> Fetched[T]:
        """A read that asked the upstream nothing."""
        return cls(value, RequestStats(), 0.0)


def fetch(upstream: Upstream, read: Callable[[UpstreamClient], Awaitable[T]]) -> Fetched[T]:
    """Run an async read against the upstream on a fresh client and event loop."""
    return fetch_each(upstream, {None: read})[None]


def fetch_each(
    upstream: Upstream, reads: Mapping[K, Callable[[UpstreamClient], Awaitable[T]]]
) -> dict[K, Fetched[T]]:
    """Run several reads at once on one fresh client and event loop, within the client's
    limit on requests in flight; each read reports its own requests and time."""
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

    results = asyncio.run(run())
    return dict(zip(reads, results, strict=True))


@dataclass(frozen=True)
class StepResult:
    """What one step did: the asset it materialised, its rows, how many of them it wrote or
    deleted, and the rest of its run metadata."""

    asset: str
    rows: int
    rows_changed: int
    metadata: dict[str, Any]

    @classmethod
    def of(
        cls, asset: str, fetched: Fetched[object], rows: int, rows_changed: int, **extra: Any
    ) -> StepResult:
        """The result with the read's cost (requests, retries, 429s, bytes, duration)."""
        metadata = {
            **fetched.stats.as_metadata(),
            "duration_s": round(fetched.seconds, 3),
            **extra,
        }
        return cls(asset, rows, rows_changed, metadata)


def epoch_seconds(text: str | None) -> float:
    """A resume point's instant as seconds since the epoch, so the UI can plot it; 0.0 when
    unreadable."""
    try:
        return parse_received_datetime(text).timestamp() if text else 0.0
    except ValueError:
        return 0.0


def in_worker_thread(work: Callable[[T], None], argument: T) -> asyncio.Future[None]:
    """Start ``work(argument)`` in the loop's worker threads at once, not when the loop next
    runs: a task made of ``asyncio.to_thread`` starts only once its creator yields, and a reader
    whose next pages are already fetched parses them all before it does."""
    return asyncio.get_running_loop().run_in_executor(None, work, argument)


async def fetch_and_store(
    batches: Iterable[list[Any]],
    fetch_batch: Callable[[list[Any]], Awaitable[T]],
    store_batch: Callable[[T], None],
) -> None:
    """Fetch batch n+1 while batch n is written (in a worker thread), one write at a time."""
    writing: asyncio.Future[None] | None = None
    for batch in batches:
        fetched = await fetch_batch(batch)
        if writing is not None:
            await writing
        writing = in_worker_thread(store_batch, fetched)
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
    worker thread, while reading goes on: DuckDB's share of a commit runs without the GIL, so
    the next pages are parsed meanwhile. One write at a time, in the order read; once a write
    has failed, nothing read after it is stored (its progress would claim the failed pages).
    """

    def __init__(self, store: Callable[[list[T]], None], size: int) -> None:
        self._store = store
        self._size = size
        self._pages: list[T] = []
        self._records = 0
        self._writing: asyncio.Future[None] | None = None
        self.committed = False  # whether any pages have been handed to ``store`` yet

    @property
    def pages(self) -> list[T]:
        """The pages held, not yet handed to ``store``."""
        return list(self._pages)

    async def __aenter__(self) -> PendingPages[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.commit()

    async def add(self, page: T, records: int) -> None:
        """Hold a page of ``records`` records; once the held pages reach ``size``, start their
        write (after the one before it has ended)."""
        self._pages.append(page)
        self._records += records
        if self._records >= self._size:
            await self._start_write()

    async def commit(self) -> None:
        """Store the held pages now and wait until every write has ended."""
        await self._start_write()
        await self._last_write()

    async def _start_write(self) -> None:
        if not self._pages:
            return
        await self._last_write()
        pages, self._pages, self._records = self._pages, [], 0
        self.committed = True
        self._writing = in_worker_thread(self._store, pages)

    async def _last_write(self) -> None:
        """Wait for the write under way, if any; its failure is raised again each time this is
        awaited, so no later write starts. Shielded: a cancelled reader still waits for it
        when it leaves the block, and never runs two writes on the connection at once."""
        if self._writing is not None:
            await asyncio.shield(self._writing)
            self._writing = None

    def discard(self) -> None:
        """Forget the held pages: leaving the block then stores nothing more."""
        self._pages, self._records = [], 0
