"""Every catalog path answers the same on the sandbox upstream and on the read API.

Bodies are compared as parsed JSON (so key order aside) together with status codes, across full
list traversals, every lookup, filters in odd casing, pairings filters, bad inputs and keys.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable

import httpx
import pytest
from sandbox.server import SandboxHandle

from ductwork.contract.encoding import loads, quote_sku
from ductwork.contract.paths import PAIRINGS_LIST, PRODUCTS_LIST, UNITS_RESOLVER, unit_path
from ductwork.contract.paths import UNIT_SLUGS as SLUGS
from tests.conftest import ReadApi

Request = tuple[str, dict[str, str | int]]


def _compare_all(
    upstream: SandboxHandle, api: ReadApi, requests: Iterable[Request], keys: tuple[str, str]
) -> int:
    """Send each request to both servers; assert equal status, content type and JSON body."""
    requests = list(requests)

    async def one(client: httpx.AsyncClient, base: str, key: str, req: Request) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return await client.get(base + req[0], params=req[1], headers=headers)

    async def run() -> None:
        limits = httpx.Limits(max_connections=8)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            for start in range(0, len(requests), 200):
                chunk = requests[start : start + 200]
                theirs = await asyncio.gather(
                    *(one(client, upstream.url, keys[0], r) for r in chunk)
                )
                ours = await asyncio.gather(*(one(client, api.url, keys[1], r) for r in chunk))
                for req, a, b in zip(chunk, theirs, ours, strict=True):
                    where = f"GET {req[0]} {req[1]}"
                    assert b.status_code == a.status_code, where
                    assert b.headers["content-type"] == a.headers["content-type"], where
                    assert loads(b.content) == loads(a.content), where
                    if a.status_code == 401:
                        assert b.headers.get("www-authenticate") == "Bearer", where

    asyncio.run(run())
    return len(requests)


def _both_keys(upstream: SandboxHandle, api: ReadApi) -> tuple[str, str]:
    return upstream.api_key, api.key


def _all_pages(upstream: SandboxHandle, path: str, count: int) -> list[Request]:
    body = httpx.get(
        upstream.url + path,
        params={"count": count},
        headers={"Authorization": f"Bearer {upstream.api_key}"},
    ).json()
    pagination = body.get("pagination") or body["data"]["pagination"]
    return [(path, {"count": count, "page": p}) for p in range(1, pagination["totalPages"] + 2)]


def _unit_records(upstream: SandboxHandle, slug: str) -> list[dict]:
    records: list[dict] = []
    for path, query in _all_pages(upstream, unit_path(slug), 1000):
        body = httpx.get(
            upstream.url + path,
            params=query,
            headers={"Authorization": f"Bearer {upstream.api_key}"},
        ).json()
        records += body["data"]
    return records


def test_full_traversals_of_every_catalog_list_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests: list[Request] = []
    for path in [PRODUCTS_LIST, PAIRINGS_LIST, *(unit_path(s) for s in SLUGS)]:
        requests += _all_pages(upstream, path, 1000)
        requests += _all_pages(upstream, path, 137)[:3]
    requests += [(PRODUCTS_LIST, {"category": slug, "count": 500}) for slug in SLUGS]
    requests += [(PRODUCTS_LIST, {}), (PAIRINGS_LIST, {}), (unit_path(SLUGS[0]), {"page": 2})]
    assert _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api)) > 20


def test_every_lookup_on_its_type_a_wrong_type_and_the_resolver_matches(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests: list[Request] = []
    odd_skus = 0
    for index, slug in enumerate(SLUGS):
        wrong = SLUGS[(index + 1) % len(SLUGS)]
        for record in _unit_records(upstream, slug):
            sku = record["sku"]
            odd_skus += any(c in sku for c in " +#%") or not sku.isascii()
            requests.append((record["_links"]["self"]["href"], {}))
            requests.append((f"{unit_path(wrong)}/{quote_sku(sku)}", {}))
            requests.append((f"{UNITS_RESOLVER}/{quote_sku(sku)}", {}))
    assert odd_skus > 0, "the sandbox should produce SKUs that need encoding"
    requests += [
        (f"{unit_path(SLUGS[0])}/NO-SUCH-SKU", {}),
        (f"{unit_path(SLUGS[0])}/a%2Fb", {}),
        (f"{UNITS_RESOLVER}/{'x' * 300}", {}),
    ]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def _odd_case(text: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def test_filters_in_odd_casing_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    rng = random.Random(5)
    requests: list[Request] = []
    for slug in SLUGS:
        records = _unit_records(upstream, slug)
        for record in rng.sample(records, min(8, len(records))):
            series = record["series"]["name"]
            family = record["family"]["name"]
            brand = record["brand"]
            requests += [
                (unit_path(slug), {"series.name": _odd_case(series, rng)}),
                (unit_path(slug), {"family.name": _odd_case(family, rng), "count": 5}),
                (unit_path(slug), {"brand": _odd_case(brand, rng), "page": 2, "count": 3}),
                (unit_path(slug), {"brand": brand.upper(), "series.name": series.lower()}),
                (unit_path(slug), {"series.name": series, "family.name": family, "brand": brand}),
            ]
        requests.append((unit_path(slug), {"brand": "no such brand"}))
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def test_pairings_filters_and_single_pairings_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    headers = {"Authorization": f"Bearer {upstream.api_key}"}
    pairings = []
    for path, query in _all_pages(upstream, PAIRINGS_LIST, 1000):
        pairings += httpx.get(upstream.url + path, params=query, headers=headers).json()["data"][
            "pairings"
        ]
    rng = random.Random(9)
    requests: list[Request] = []
    for pairing in rng.sample(pairings, min(60, len(pairings))):
        requests.append((f"{PAIRINGS_LIST}/{pairing['relationshipId']}", {}))
        for product in pairing["products"]:
            requests.append((PAIRINGS_LIST, {"sku": product["sku"]}))
            requests.append((PAIRINGS_LIST, {"sku": product["sku"], "relType": pairing["relType"]}))
    for rel_type in ("Pairing", "Standalone", "Combinations"):
        requests.append((PAIRINGS_LIST, {"relType": rel_type, "count": 1000}))
    requests += [(f"{PAIRINGS_LIST}/999999999", {}), (PAIRINGS_LIST, {"sku": "nothing"})]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


BAD_INPUTS: list[Request] = [
    (PRODUCTS_LIST, {"count": 0}),
    (PRODUCTS_LIST, {"count": 1001}),
    (PRODUCTS_LIST, {"page": 0}),
    (PRODUCTS_LIST, {"page": "x"}),
    (PRODUCTS_LIST, {"count": "1.5"}),
    (PRODUCTS_LIST, {"category": "bogus"}),
    (unit_path("indoor-units"), {"count": -1}),
    (unit_path("accessories"), {"page": "2x"}),
    (PAIRINGS_LIST, {"relType": "Bogus"}),
    (PAIRINGS_LIST, {"relType": "pairing"}),
    (PAIRINGS_LIST, {"count": 99999999999999999999}),
    (f"{PAIRINGS_LIST}/abc", {}),
    (f"{PAIRINGS_LIST}/1.5", {}),
    ("/products/v2.0/no-such-list", {}),
]


def test_bad_inputs_answer_the_same_errors(upstream: SandboxHandle, read_api: ReadApi) -> None:
    _compare_all(upstream, read_api, BAD_INPUTS, _both_keys(upstream, read_api))


@pytest.mark.parametrize("keys", [("", ""), ("wrong-key", "wrong-key")], ids=["missing", "wrong"])
def test_missing_and_wrong_keys_answer_401_alike(
    upstream: SandboxHandle, read_api: ReadApi, keys: tuple[str, str]
) -> None:
    requests: list[Request] = [
        (PRODUCTS_LIST, {}),
        (f"{unit_path('branch-boxes')}/ANY", {}),
        (f"{UNITS_RESOLVER}/ANY", {}),
        (PAIRINGS_LIST, {"relType": "Bogus"}),
        (f"{PAIRINGS_LIST}/1", {}),
        *((unit_path(slug), {}) for slug in SLUGS),
    ]
    _compare_all(upstream, read_api, requests, keys)
