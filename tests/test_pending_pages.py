"""How held pages are committed while reading goes on (``ductwork.sync.context.PendingPages``).

Unit tests: the store is a plain function run in the loop's worker threads, as the sync runs
it, without a warehouse; the walks that use it are proven on real warehouses elsewhere
(``tests/test_sync_streams.py``, ``tests/resilience``).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from ductwork.sync.context import PendingPages

WAIT_S = 10  # an upper bound on waiting for another thread, never reached when things work


class Stores:
    """A store that records what it stored, in order; a write can be held until released, and
    a write of a page named in ``failing`` fails."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.stored: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.failing = failing
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def __call__(self, pages: list[str]) -> None:
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        self.started.set()
        try:
            assert self.release.wait(WAIT_S)
            if self.failing & set(pages):
                raise RuntimeError(f"write of {pages} failed")
            self.stored.append(pages)
        finally:
            with self._lock:
                self.running -= 1


def test_a_full_batch_starts_its_write_before_the_reader_yields_to_the_loop() -> None:
    """The write of a full batch is under way while the reader, without awaiting anything,
    goes on with its next pages (a write started as a task would wait for the reader to
    yield, and a reader whose pages are already fetched would parse them all first)."""
    stores = Stores()
    stores.release.clear()

    async def read() -> bool:
        async with PendingPages(stores, size=2) as held:
            await held.add("p1", 1)
            await held.add("p2", 1)  # the batch is full: its write starts
            started = stores.started.wait(WAIT_S)  # blocking: the loop does not run meanwhile
            stores.release.set()
            return started

    assert asyncio.run(read())
    assert stores.stored == [["p1", "p2"]]


def test_writes_run_one_at_a_time_in_the_order_read_and_the_rest_is_stored_on_leaving() -> None:
    stores = Stores()

    async def read() -> None:
        async with PendingPages(stores, size=2) as held:
            for page in ("p1", "p2", "p3", "p4", "p5"):
                await held.add(page, 1)

    asyncio.run(read())
    assert stores.stored == [["p1", "p2"], ["p3", "p4"], ["p5"]]
    assert stores.most_running == 1


def test_nothing_read_after_a_failed_write_is_stored_and_its_failure_is_raised() -> None:
    """A later write would record progress past the pages the failed one lost."""
    stores = Stores(failing=frozenset({"p1"}))

    async def read() -> None:
        async with PendingPages(stores, size=2) as held:
            for page in ("p1", "p2", "p3", "p4", "p5"):
                await held.add(page, 1)

    with pytest.raises(RuntimeError, match="failed"):
        asyncio.run(read())
    assert stores.stored == []


def test_a_reader_that_fails_still_stores_what_it_read_after_the_write_under_way() -> None:
    stores = Stores()

    async def read() -> None:
        async with PendingPages(stores, size=2) as held:
            for page in ("p1", "p2", "p3"):
                await held.add(page, 1)
            raise ConnectionError("the upstream went away")

    with pytest.raises(ConnectionError):
        asyncio.run(read())
    assert stores.stored == [["p1", "p2"], ["p3"]]


def test_a_cancelled_reader_waits_for_the_write_under_way_then_stores_what_it_holds() -> None:
    """An interrupt cancels the reading task while a write runs: the write is not abandoned
    in its thread while the next one starts on the same connection."""
    stores = Stores()
    stores.release.clear()
    cancelled = []

    async def read() -> None:
        async with PendingPages(stores, size=1) as held:
            await held.add("p1", 1)  # the first write starts and is held
            await held.add("p2", 1)  # waits for it: cancelled here

    async def main() -> None:
        task = asyncio.ensure_future(read())
        assert await asyncio.to_thread(stores.started.wait, WAIT_S)
        task.cancel()
        await asyncio.sleep(0)  # the task takes its cancellation while the write is held
        stores.release.set()
        try:
            await task
        except asyncio.CancelledError:
            cancelled.append(True)

    asyncio.run(main())
    assert cancelled == [True]
    assert stores.stored == [["p1"], ["p2"]]
    assert stores.most_running == 1


def test_discarded_pages_are_not_stored() -> None:
    stores = Stores()

    async def read() -> bool:
        async with PendingPages(stores, size=10) as held:
            await held.add("p1", 1)
            held.discard()
            return held.committed

    assert asyncio.run(read()) is False
    assert stores.stored == []
