"""Bursts of keyed requests spread over every worker of several ``ductwork serve`` processes.

Which worker takes a connection is the kernel's choice (by a hash of its addresses), and a
worker still starting takes none; a test of a limit counted across workers first makes sure
each worker holds a connection, from the pids in the JSON access logs, and only then sends its
burst.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

WARM_CONNECTIONS = 12  # per process, opened at once: enough for both workers to accept some
WARM_ROUNDS = 20  # a worker still starting up under load accepts nothing yet
LOG_WAIT_S = 10.0
WINDOW_S = 1.0  # the limits count per second
ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1)  # a client is a connection


def bearer(key: str) -> dict[str, str]:
    """The header that presents ``key``."""
    return {"Authorization": f"Bearer {key}"}


def logged_pids(access_logs: Sequence[Path], request_ids: set[str]) -> dict[str, int]:
    """The worker pid that answered each of ``request_ids``, from the access logs (waiting,
    bounded, for the lines to be written)."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        found = {
            entry["request_id"]: entry["pid"]
            for log in access_logs
            for line in log.read_text(encoding="utf-8").splitlines()
            if line.startswith("{") and (entry := json.loads(line)).get("request_id") in request_ids
        }
        if len(found) == len(request_ids) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


async def connections_to_every_worker(
    urls: Sequence[str], access_logs: Sequence[Path], workers: int
) -> list[httpx.AsyncClient]:
    """One open keep-alive connection to each worker behind each of ``urls``.

    Connections are opened at once in rounds until the access logs show every worker answering
    one; the others are closed. Fewer than ``len(urls) * workers`` come back only when a worker
    accepted nothing in ``WARM_ROUNDS`` rounds."""
    chosen: dict[int, httpx.AsyncClient] = {}
    opened: list[httpx.AsyncClient] = []
    for round_ in range(WARM_ROUNDS):
        batch = {
            f"warm-{round_}-{n}-{i}": httpx.AsyncClient(base_url=url, limits=ONE, timeout=30)
            for n, url in enumerate(urls)
            for i in range(WARM_CONNECTIONS)
        }
        opened += batch.values()
        await asyncio.gather(
            *(
                client.get("/healthz", headers={"X-Request-ID": rid})
                for rid, client in batch.items()
            )
        )
        for rid, pid in logged_pids(access_logs, set(batch)).items():
            chosen.setdefault(pid, batch[rid])
        if len(chosen) == len(urls) * workers:
            break
    for client in opened:
        if client not in chosen.values():
            await client.aclose()
    return list(chosen.values())


@dataclass(frozen=True)
class Burst:
    """What one burst got back."""

    answers: list[httpx.Response]
    request_ids: set[str]
    elapsed_s: float
    connections: int


async def send_burst(
    connections: Sequence[httpx.AsyncClient],
    paths_: Sequence[str],
    key: str,
    count: int,
    tag: str,
) -> Burst:
    """``count`` GETs spread evenly over ``connections`` (each sends its share in a row, all
    connections at once), alternating between ``paths_``."""

    async def share(index: int, client: httpx.AsyncClient) -> list[httpx.Response]:
        answers = []
        for n in range(index, count, len(connections)):
            headers = {**bearer(key), "X-Request-ID": f"{tag}-{n}"}
            answers.append(await client.get(paths_[n % len(paths_)], headers=headers))
        return answers

    started = time.monotonic()
    shares = await asyncio.gather(*(share(i, c) for i, c in enumerate(connections)))
    elapsed = time.monotonic() - started
    ids = {f"{tag}-{n}" for n in range(count)}
    answers = [answer for part in shares for answer in part]
    return Burst(answers, ids, elapsed, len(connections))


def burst_over_every_worker(
    urls: Sequence[str],
    access_logs: Sequence[Path],
    workers: int,
    keys: Sequence[str],
    paths_: Sequence[str],
    count: int,
) -> Burst:
    """``count`` requests over one connection to each worker, all inside one limit window.

    A burst slower than the window proves nothing about a per-second limit, so it is sent
    again with the next of ``keys`` (a fresh count) until one fits; the test fails when none
    does."""

    async def until_one_fits() -> Burst:
        connections = await connections_to_every_worker(urls, access_logs, workers)
        try:
            for attempt, key in enumerate(keys):
                burst = await send_burst(connections, paths_, key, count, f"burst{attempt}")
                if burst.elapsed_s < WINDOW_S:
                    return burst
            pytest.fail(f"no burst of {count} fitted in {WINDOW_S} s")
        finally:
            for client in connections:
                await client.aclose()

    return asyncio.run(until_one_fits())
