"""Many requests through a few workers, instead of one waiting task per request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


async def map_bounded(
    fetch: Callable[[Item], Awaitable[Result]], items: Sequence[Item], workers: int
) -> list[Result]:
    """``fetch`` of every item, ``workers`` at a time, the results in the order of ``items``.

    ``asyncio.gather`` of ten thousand requests makes ten thousand tasks at once, nearly all
    of them waiting for the client's limit on requests in flight, each holding its coroutine
    frames: some 20 MB at a time in a lead-detail batch. A few workers taking the next item
    when one is done keep as many requests in flight with a handful of tasks. The first
    exception is raised as is, and the other workers are cancelled.
    """
    results: list[Result | None] = [None] * len(items)
    positions = iter(range(len(items)))

    async def work() -> None:
        for position in positions:
            results[position] = await fetch(items[position])

    tasks = [asyncio.ensure_future(work()) for _ in range(max(1, min(workers, len(items))))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return results  # type: ignore[return-value]  # every position was filled
