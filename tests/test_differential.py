"""Every path answers the same on the sandbox upstream and on the read API.

Bodies are compared as parsed JSON (so key order aside) together with status codes, across full
list traversals, every lookup, filters in odd casing, cursor walks, bad inputs and keys.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable

import httpx
import pytest
from sandbox.server import SandboxHandle

from ductwork.contract.encoding import loads, quote_sku
from ductwork.contract.paths import (
    CONTRACTORS,
    INDOOR_MODELS,
    INTERNAL_DIGITAL_ASSETS,
    LEADS,
    PAIRINGS_LIST,
    PRODUCTS_LIST,
    SUBMITTAL_DATA,
    UNITS_RESOLVER,
    WAREHOUSE_DIGITAL_ASSETS,
    unit_path,
)
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


def _get(upstream: SandboxHandle, path: str, **query: str | int) -> dict:
    headers = {"Authorization": f"Bearer {upstream.api_key}"}
    return httpx.get(upstream.url + path, params=query, headers=headers, timeout=30).json()


def _all_assets(upstream: SandboxHandle) -> list[dict]:
    assets: list[dict] = []
    for path, query in _all_pages(upstream, WAREHOUSE_DIGITAL_ASSETS, 1000):
        assets += _get(upstream, path, **query)["data"]
    return assets


def test_digital_asset_pages_and_updated_after_ties_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    assets = _all_assets(upstream)
    stamps = [asset["updatedAt"] for asset in assets]
    busiest = max(set(stamps), key=stamps.count)
    assert stamps.count(busiest) > 1, "the sandbox should share updatedAt between assets"
    requests: list[Request] = _all_pages(upstream, WAREHOUSE_DIGITAL_ASSETS, 1000)
    requests += [(WAREHOUSE_DIGITAL_ASSETS, {}), (WAREHOUSE_DIGITAL_ASSETS, {"page": 3})]
    rng = random.Random(3)
    for stamp in [busiest, stamps[0], stamps[-1], *rng.sample(stamps, 10)]:
        requests.append((WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": stamp, "count": 1000}))
        offset = stamp.replace("Z", "+00:00")
        requests.append((WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": offset, "count": 7}))
    requests += [
        (WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01T02:00:00.1234567+02:00"}),
        (WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01"}),
        (WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01T00:00:00"}),
        (WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "yesterday"}),
        (WAREHOUSE_DIGITAL_ASSETS, {"count": 0}),
        (WAREHOUSE_DIGITAL_ASSETS, {"page": "0"}),
        (WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2999-01-01T00:00:00Z"}),
    ]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def test_every_submittal_pair_matches(upstream: SandboxHandle, read_api: ReadApi) -> None:
    requests: list[Request] = []
    for path, query in _all_pages(upstream, PAIRINGS_LIST, 1000):
        for pairing in _get(upstream, path, **query)["data"]["pairings"]:
            srns = [p["srn"] for p in pairing["products"]]
            if pairing["relType"] == "Pairing":
                requests.append((SUBMITTAL_DATA, {"idu": srns[0], "odu": srns[1]}))
                requests.append((SUBMITTAL_DATA, {"idu": srns[0]}))
            elif pairing["relType"] == "Standalone":
                requests.append((SUBMITTAL_DATA, {"idu": srns[0]}))
                requests.append((SUBMITTAL_DATA, {"odu": srns[0]}))
    requests += [(SUBMITTAL_DATA, {}), (SUBMITTAL_DATA, {"idu": "nope", "odu": "nope"})]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def _walk_requests(upstream: SandboxHandle, count: int, **query: str) -> list[Request]:
    """The requests of a full cursor walk of the lead list, as the upstream answers it."""
    requests: list[Request] = []
    params: dict[str, str | int] = {"count": count, **query}
    while True:
        requests.append((LEADS, dict(params)))
        page = _get(upstream, LEADS, **params)["data"]
        if len(page) < count:
            return requests
        params["cursorCreatedDate"] = page[-1]["CreatedDate"]
        params["cursorId"] = page[-1]["Id"]


def test_full_lead_cursor_walks_projections_and_created_after_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests = _walk_requests(upstream, 1000)
    assert len(requests) > 5
    first = _get(upstream, LEADS, count=1000)["data"]
    dates = [lead["CreatedDate"] for lead in first]
    shared = max(set(dates), key=dates.count)
    requests += _walk_requests(upstream, 1000, createdAfter=dates[len(dates) // 2])[:3]
    requests += _walk_requests(upstream, 250, fields="Status,Name")[:4]
    requests += _walk_requests(upstream, 1000, fields="LeadSource, StateCode,Id")[:2]
    requests += [
        (LEADS, {}),
        (LEADS, {"createdAfter": shared, "count": 50}),
        (LEADS, {"cursorCreatedDate": shared, "cursorId": first[0]["Id"], "count": 20}),
        (LEADS, {"cursorCreatedDate": shared}),
        (LEADS, {"cursorId": first[0]["Id"]}),
        (LEADS, {"fields": "Status,NoSuchField"}),
        (LEADS, {"createdAfter": "2026-02-30T00:00:00Z"}),
        (LEADS, {"count": 0}),
        (LEADS, {"count": 1001}),
    ]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def test_lead_details_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    leads = _get(upstream, LEADS, count=1000)["data"]
    requests: list[Request] = [(f"{LEADS}/{quote_sku(lead['Id'])}", {}) for lead in leads]
    requests += [(f"{LEADS}/no-such-lead", {})]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


def test_internal_lists_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    requests: list[Request] = [
        (CONTRACTORS, {}),
        (INDOOR_MODELS, {}),
        (INTERNAL_DIGITAL_ASSETS, {}),
        ("/internal/v1.0/no-such-path", {}),
    ]
    _compare_all(upstream, read_api, requests, _both_keys(upstream, read_api))


@pytest.mark.parametrize("keys", [("", ""), ("wrong-key", "wrong-key")], ids=["missing", "wrong"])
def test_every_family_answers_401_in_its_own_style(
    upstream: SandboxHandle, read_api: ReadApi, keys: tuple[str, str]
) -> None:
    requests: list[Request] = [
        (WAREHOUSE_DIGITAL_ASSETS, {}),
        (SUBMITTAL_DATA, {"idu": "x"}),
        (LEADS, {}),
        (f"{LEADS}/x", {}),
        (CONTRACTORS, {}),
        (INTERNAL_DIGITAL_ASSETS, {}),
        ("/internal/v1.0/jobs/pim-image-sync", {}),
    ]
    _compare_all(upstream, read_api, requests, keys)
