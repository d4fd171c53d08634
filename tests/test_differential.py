"""Every path answers the same on the sandbox upstream and on the read API.

Bodies are compared as parsed JSON (so key order aside) together with status codes, across full
list traversals, every lookup, filters in odd casing, cursor walks, bad inputs and keys.
"""

from __future__ import annotations

import random
from collections import Counter

import httpx
import pytest

from ductwork.contract.encoding import quote_sku
from ductwork.contract.paths import (
    DATA_WAREHOUSE_DIGITAL_ASSETS,
    LEADS,
    PRODUCTS_LIST,
    UNITS_RESOLVER,
    unit_path,
)
from ductwork.contract.paths import UNIT_SLUGS as SLUGS
from ductwork.streams.registry import CONTRACTORS, INDOOR_MODELS, MANUALS, PAIRINGS, SUBMITTALS
from sandbox.server import SandboxHandle
from tests.conftest import ReadApi
from tests.helpers.api import (
    Request,
    all_assets,
    all_pages,
    both_keys,
    compare_all,
    get_json,
    unit_records,
    walk_requests,
)


def test_full_traversals_of_every_catalog_list_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests: list[Request] = []
    for path in [PRODUCTS_LIST, PAIRINGS.path, *(unit_path(s) for s in SLUGS)]:
        requests += all_pages(upstream, path, 1000)
        requests += all_pages(upstream, path, 137)[:3]
    requests += [(PRODUCTS_LIST, {"category": slug, "count": 500}) for slug in SLUGS]
    requests += [(PRODUCTS_LIST, {}), (PAIRINGS.path, {}), (unit_path(SLUGS[0]), {"page": 2})]
    assert compare_all(upstream, read_api, requests, both_keys(upstream, read_api)) > 20


def test_every_lookup_on_its_type_a_wrong_type_and_the_resolver_matches(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests: list[Request] = []
    odd_skus = 0
    for index, slug in enumerate(SLUGS):
        wrong = SLUGS[(index + 1) % len(SLUGS)]
        for record in unit_records(upstream, slug):
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
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def _odd_case(text: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def test_filters_in_odd_casing_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    rng = random.Random(5)
    requests: list[Request] = []
    for slug in SLUGS:
        records = unit_records(upstream, slug)
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
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def test_pairings_filters_and_single_pairings_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    headers = {"Authorization": f"Bearer {upstream.api_key}"}
    pairings = []
    for path, query in all_pages(upstream, PAIRINGS.path, 1000):
        pairings += httpx.get(upstream.url + path, params=query, headers=headers).json()["data"][
            "pairings"
        ]
    rng = random.Random(9)
    requests: list[Request] = []
    for pairing in rng.sample(pairings, min(60, len(pairings))):
        requests.append((f"{PAIRINGS.path}/{pairing['relationshipId']}", {}))
        for product in pairing["products"]:
            requests.append((PAIRINGS.path, {"sku": product["sku"]}))
            requests.append((PAIRINGS.path, {"sku": product["sku"], "relType": pairing["relType"]}))
    for rel_type in ("Pairing", "Standalone", "Combinations"):
        requests.append((PAIRINGS.path, {"relType": rel_type, "count": 1000}))
    requests += [(f"{PAIRINGS.path}/999999999", {}), (PAIRINGS.path, {"sku": "nothing"})]
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


BAD_INPUTS: list[Request] = [
    (PRODUCTS_LIST, {"count": 0}),
    (PRODUCTS_LIST, {"count": 1001}),
    (PRODUCTS_LIST, {"page": 0}),
    (PRODUCTS_LIST, {"page": "x"}),
    (PRODUCTS_LIST, {"count": "1.5"}),
    (PRODUCTS_LIST, {"category": "bogus"}),
    (unit_path("indoor-units"), {"count": -1}),
    (unit_path("accessories"), {"page": "2x"}),
    (PAIRINGS.path, {"relType": "Bogus"}),
    (PAIRINGS.path, {"relType": "pairing"}),
    (PAIRINGS.path, {"count": 99999999999999999999}),
    (f"{PAIRINGS.path}/abc", {}),
    (f"{PAIRINGS.path}/1.5", {}),
    ("/products/v2.0/no-such-list", {}),
]


def test_bad_inputs_answer_the_same_errors(upstream: SandboxHandle, read_api: ReadApi) -> None:
    compare_all(upstream, read_api, BAD_INPUTS, both_keys(upstream, read_api))


@pytest.mark.parametrize("keys", [("", ""), ("wrong-key", "wrong-key")], ids=["missing", "wrong"])
def test_missing_and_wrong_keys_answer_401_alike(
    upstream: SandboxHandle, read_api: ReadApi, keys: tuple[str, str]
) -> None:
    requests: list[Request] = [
        (PRODUCTS_LIST, {}),
        (f"{unit_path('branch-boxes')}/ANY", {}),
        (f"{UNITS_RESOLVER}/ANY", {}),
        (PAIRINGS.path, {"relType": "Bogus"}),
        (f"{PAIRINGS.path}/1", {}),
        *((unit_path(slug), {}) for slug in SLUGS),
    ]
    compare_all(upstream, read_api, requests, keys)


def test_digital_asset_pages_and_updated_after_ties_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    assets = all_assets(upstream)
    stamps = [asset["updatedAt"] for asset in assets]
    busiest = Counter(stamps).most_common(1)[0][0]
    assert stamps.count(busiest) > 1, "the sandbox should share updatedAt between assets"
    requests: list[Request] = all_pages(upstream, DATA_WAREHOUSE_DIGITAL_ASSETS, 1000)
    requests += [(DATA_WAREHOUSE_DIGITAL_ASSETS, {}), (DATA_WAREHOUSE_DIGITAL_ASSETS, {"page": 3})]
    rng = random.Random(3)
    for stamp in [busiest, stamps[0], stamps[-1], *rng.sample(stamps, 10)]:
        requests.append((DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": stamp, "count": 1000}))
        offset = stamp.replace("Z", "+00:00")
        requests.append((DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": offset, "count": 7}))
    requests += [
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01T02:00:00.1234567+02:00"}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01"}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2020-01-01T00:00:00"}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "yesterday"}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"count": 0}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"page": "0"}),
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {"updatedAfter": "2999-01-01T00:00:00Z"}),
    ]
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def test_every_submittal_pair_matches(upstream: SandboxHandle, read_api: ReadApi) -> None:
    requests: list[Request] = []
    for path, query in all_pages(upstream, PAIRINGS.path, 1000):
        for pairing in get_json(upstream, path, **query)["data"]["pairings"]:
            srns = [p["srn"] for p in pairing["products"]]
            if pairing["relType"] == "Pairing":
                requests.append((SUBMITTALS.path, {"idu": srns[0], "odu": srns[1]}))
                requests.append((SUBMITTALS.path, {"idu": srns[0]}))
            elif pairing["relType"] == "Standalone":
                requests.append((SUBMITTALS.path, {"idu": srns[0]}))
                requests.append((SUBMITTALS.path, {"odu": srns[0]}))
    requests += [(SUBMITTALS.path, {}), (SUBMITTALS.path, {"idu": "nope", "odu": "nope"})]
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def test_full_lead_cursor_walks_projections_and_created_after_match(
    upstream: SandboxHandle, read_api: ReadApi
) -> None:
    requests = walk_requests(upstream, 1000)
    assert len(requests) > 5
    first = get_json(upstream, LEADS, count=1000)["data"]
    dates = [lead["CreatedDate"] for lead in first]
    shared = Counter(dates).most_common(1)[0][0]
    requests += walk_requests(upstream, 1000, createdAfter=dates[len(dates) // 2])[:3]
    requests += walk_requests(upstream, 250, fields="Status,Name")[:4]
    requests += walk_requests(upstream, 1000, fields="LeadSource, StateCode,Id")[:2]
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
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def test_lead_details_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    leads = get_json(upstream, LEADS, count=1000)["data"]
    requests: list[Request] = [(f"{LEADS}/{quote_sku(lead['Id'])}", {}) for lead in leads]
    requests += [(f"{LEADS}/no-such-lead", {})]
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


def test_internal_lists_match(upstream: SandboxHandle, read_api: ReadApi) -> None:
    requests: list[Request] = [
        (CONTRACTORS.path, {}),
        (INDOOR_MODELS.path, {}),
        (MANUALS.path, {}),
        ("/internal/v1.0/no-such-path", {}),
    ]
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


@pytest.mark.parametrize("keys", [("", ""), ("wrong-key", "wrong-key")], ids=["missing", "wrong"])
def test_every_family_answers_401_in_its_own_style(
    upstream: SandboxHandle, read_api: ReadApi, keys: tuple[str, str]
) -> None:
    requests: list[Request] = [
        (DATA_WAREHOUSE_DIGITAL_ASSETS, {}),
        (SUBMITTALS.path, {"idu": "x"}),
        (LEADS, {}),
        (f"{LEADS}/x", {}),
        (CONTRACTORS.path, {}),
        (MANUALS.path, {}),
        ("/internal/v1.0/jobs/pim-image-sync", {}),
    ]
    compare_all(upstream, read_api, requests, keys)
