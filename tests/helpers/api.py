"""Comparing the read API with the upstream: requests sent to both, answers that must agree."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import aiohttp
import httpx
from yarl import URL

from ductwork.contract.encoding import loads
from ductwork.contract.paths import (
    DATA_WAREHOUSE_DIGITAL_ASSETS,
    LEADS,
    PRODUCTS_LIST,
    UNIT_SLUGS,
    unit_path,
)
from ductwork.streams.registry import MANUALS, PAIRINGS
from ductwork.upstream.timestamps import canonical_or_received
from sandbox.server import SandboxHandle


class Server(Protocol):
    """The read API under test: its base URL and a key."""

    url: str
    key: str


Request = tuple[str, dict[str, str | int]]


@dataclass(frozen=True)
class Answer:
    """One server's answer to one request."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def compare_all(
    upstream: SandboxHandle | Server,
    api: Server,
    requests: Iterable[Request],
    keys: tuple[str, str],
) -> int:
    """Send each request to both servers; assert equal status, content type and JSON body.
    ``upstream`` is the reference: the sandbox, or another read API."""
    requests = list(requests)

    async def one(session: aiohttp.ClientSession, base: str, key: str, req: Request) -> Answer:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        query = {name: str(value) for name, value in req[1].items()}
        url = URL(base + req[0], encoded=True)
        async with session.get(url, params=query, headers=headers) as response:
            return Answer(response.status, response.headers.copy(), await response.read())

    async def run() -> None:
        connector = aiohttp.TCPConnector(limit=8)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for start in range(0, len(requests), 500):
                chunk = requests[start : start + 500]
                theirs = await asyncio.gather(
                    *(one(session, upstream.url, keys[0], r) for r in chunk)
                )
                ours = await asyncio.gather(*(one(session, api.url, keys[1], r) for r in chunk))
                for req, a, b in zip(chunk, theirs, ours, strict=True):
                    where = f"GET {req[0]} {req[1]}"
                    assert b.status == a.status, where
                    assert b.headers["content-type"] == a.headers["content-type"], where
                    assert loads(b.body) == loads(a.body), where + first_difference(
                        loads(a.body), loads(b.body)
                    )
                    if a.status == 401:
                        assert b.headers.get("www-authenticate") == "Bearer", where

    asyncio.run(run())
    return len(requests)


def first_difference(theirs: object, ours: object) -> str:
    """A short description of where two JSON values first differ."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in sorted(set(theirs) | set(ours)):
            if theirs.get(key) != ours.get(key):
                return f" at {key!r}:" + first_difference(theirs.get(key), ours.get(key))
    if isinstance(theirs, list) and isinstance(ours, list):
        if len(theirs) != len(ours):
            return f" lengths {len(theirs)} (upstream) != {len(ours)} (ours)"
        for index, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            if a != b:
                return f" at [{index}]:" + first_difference(a, b)
    return f" upstream {str(theirs)[:300]} != ours {str(ours)[:300]}"


def both_keys(upstream: SandboxHandle, api: Server) -> tuple[str, str]:
    return upstream.api_key, api.key


def all_pages(upstream: SandboxHandle, path: str, count: int) -> list[Request]:
    """Every page of a numbered list at ``count`` a page, and the one past its last."""
    body = get_json(upstream, path, count=count)
    pagination = body.get("pagination") or body["data"]["pagination"]
    return [(path, {"count": count, "page": p}) for p in range(1, pagination["totalPages"] + 2)]


def unit_records(upstream: SandboxHandle, slug: str) -> list[dict]:
    """Every record of one unit type's list, page by page."""
    records: list[dict] = []
    for path, query in all_pages(upstream, unit_path(slug), 1000):
        records += get_json(upstream, path, **query)["data"]
    return records


def get_json(upstream: SandboxHandle, path: str, **query: object) -> dict:
    """The upstream's JSON answer to one GET, on the kept-alive client for that upstream."""
    return _client(upstream.url, upstream.api_key).get(path, params=query).json()


@cache
def _client(base_url: str, key: str) -> httpx.Client:
    """One client per upstream and key for the whole test run: tests read thousands of single
    records, and a client per request (``httpx.get``) costs a connection and a TLS context
    each time. Its connections are closed when the test process ends."""
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=30)


def all_assets(upstream: SandboxHandle) -> list[dict]:
    assets: list[dict] = []
    for path, query in all_pages(upstream, DATA_WAREHOUSE_DIGITAL_ASSETS, 1000):
        assets += get_json(upstream, path, **query)["data"]
    return assets


def walk_requests(upstream: SandboxHandle, count: int, **query: str) -> list[Request]:
    """The requests of a full cursor walk of the lead list, as the upstream answers it."""
    requests: list[Request] = []
    params: dict[str, str | int] = {"count": count, **query}
    while True:
        requests.append((LEADS, dict(params)))
        page = get_json(upstream, LEADS, **params)["data"]
        if len(page) < count:
            return requests
        # A record may spell its date in a form query parameters do not accept (``+0000``);
        # the walk sends it back in the contract's form, as the sync does.
        params["cursorCreatedDate"] = canonical_or_received(page[-1]["CreatedDate"])
        params["cursorId"] = page[-1]["Id"]


def mirror_requests(upstream: SandboxHandle) -> list[Request]:
    """Full traversals of every list: what "the mirror equals the upstream" compares."""
    requests: list[Request] = []
    for path in [PRODUCTS_LIST, PAIRINGS.path, *(unit_path(s) for s in UNIT_SLUGS)]:
        requests += all_pages(upstream, path, 1000)
    requests += all_pages(upstream, DATA_WAREHOUSE_DIGITAL_ASSETS, 1000)
    requests += walk_requests(upstream, 1000)
    requests.append((MANUALS.path, {}))
    return requests
