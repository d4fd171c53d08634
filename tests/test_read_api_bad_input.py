"""Bad input to the read API, beyond what the schema fuzzer draws: odd and overlong SKUs,
percent-encoded slashes, SQL-looking values, unknown, repeated and absurd parameters. Each
request goes to the upstream too; the read API must give the same answer, never a 5xx."""

from __future__ import annotations

import asyncio

import aiohttp
import httpx
import pytest
from yarl import URL

from ductwork.contract.params import MAX_INTEGER
from ductwork.contract.paths import (
    DATA_WAREHOUSE_DIGITAL_ASSETS,
    LEADS,
    PRODUCTS_LIST,
    UNITS_RESOLVER,
    unit_path,
)
from ductwork.streams.registry import MANUALS, PAIRINGS, SUBMITTALS
from sandbox.server import SandboxHandle
from tests.conftest import ReadApi
from tests.helpers.api import both_keys, compare_all

ODD_SKUS = (
    "A%2FB",  # an encoded slash inside one segment
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "%00",
    "%ZZ",  # not valid percent-encoding
    "%27%20OR%20%271%27%3D%271",  # ' OR '1'='1
    "x%3B%20DROP%20TABLE%20units%3B--",
    "%F0%9F%94%A5",  # an emoji
    "%C3%28",  # invalid UTF-8
    "%20",
    "S" * 10_000,  # a 10 kB SKU
)
SQL_LIKE = "%27%20OR%201%3D1--"
HUGE = "9" * 40
LIST_QUERIES = (
    f"count={HUGE}",
    "count=-1",
    "count=0",
    "count=1e3",
    "count=",
    "count=%20100",
    "page=0",
    f"page={HUGE}",
    "page=1.5",
    "count=5&count=7",  # repeated parameter
    "page=1&page=2",
    "unknownParameter=1",
    f"count=10&{SQL_LIKE}={SQL_LIKE}",
    "count=" + "1" * 10_000,
)


# ISO 8601's basic offset form: records may carry it, query parameters may not (contract).
BASIC_OFFSET = "2024-01-01T00:00:00.000%2B0000"


def test_a_date_time_parameter_with_a_basic_form_offset_is_a_400(read_api: ReadApi) -> None:
    targets = [
        f"{LEADS}?createdAfter={BASIC_OFFSET}",
        f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter={BASIC_OFFSET}",
        f"{LEADS}?cursorCreatedDate={BASIC_OFFSET}&cursorId=00Q",
    ]
    assert asyncio.run(statuses(read_api.url, read_api.key, targets)) == [400, 400, 400]


# A value followed by a newline (%0A) is no integer and no date-time, whatever ``$`` accepts.
TRAILING_NEWLINE_TARGETS = (
    f"{PRODUCTS_LIST}?count=12%0A",  # a plain page: the short path's reading
    f"{PRODUCTS_LIST}?page=1%0A",
    f"{unit_path('indoor-units')}?count=5%0A&brand=x",  # a filtered page: the routes' reading
    f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter=2024-01-01T00:00:00Z%0A",
    f"{LEADS}?createdAfter=2024-01-01T00:00:00.000Z%0A",
)


def test_a_parameter_with_a_trailing_newline_is_a_400(read_api: ReadApi) -> None:
    found = asyncio.run(statuses(read_api.url, read_api.key, list(TRAILING_NEWLINE_TARGETS)))
    assert found == [400] * len(TRAILING_NEWLINE_TARGETS)


def bad_requests() -> list[str]:
    """Raw, already percent-encoded request targets."""
    targets = []
    for sku in ODD_SKUS:
        targets += [
            f"{unit_path('indoor-units')}/{sku}",
            f"{UNITS_RESOLVER}/{sku}",
            f"{PAIRINGS.path}?sku={sku}",
            f"{LEADS}/{sku}",
            f"{SUBMITTALS.path}?idu={sku}&odu={sku}",
        ]
    for query in LIST_QUERIES:
        targets += [
            f"{PRODUCTS_LIST}?{query}",
            f"{unit_path('outdoor-units')}?{query}",
            f"{PAIRINGS.path}?{query}",
            f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?{query}",
            f"{LEADS}?{query}",
        ]
    targets += [
        f"{PRODUCTS_LIST}?category={SQL_LIKE}",
        f"{PRODUCTS_LIST}?category=indoor-units&category=outdoor-units",
        f"{unit_path('indoor-units')}?series.name={SQL_LIKE}&brand=%25",
        f"{PAIRINGS.path}?relType={SQL_LIKE}",
        f"{PAIRINGS.path}?relType=1&relType=2",
        f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter={SQL_LIKE}",
        f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter=2024-13-45T99:99:99Z",
        f"{LEADS}?cursorCreatedDate={SQL_LIKE}&cursorId=x",
        f"{LEADS}?cursorCreatedDate=2024-01-01T00:00:00Z",
        f"{LEADS}?createdAfter={SQL_LIKE}",
        f"{LEADS}?createdAfter={BASIC_OFFSET}",
        f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter={BASIC_OFFSET}",
        f"{LEADS}?fields={SQL_LIKE}",
        f"{LEADS}?fields=Id,Id,%2F,,",
        f"{SUBMITTALS.path}?idu=",
        f"{SUBMITTALS.path}?unknown=1",
        f"{MANUALS.path}?count={HUGE}&page=-1",
    ]
    return targets


async def statuses(base: str, key: str, targets: list[str]) -> list[int]:
    """The status of each raw target, sent byte for byte."""
    headers = {"Authorization": f"Bearer {key}"}
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one(target: str) -> int:
            async with session.get(URL(base + target, encoded=True), headers=headers) as answer:
                await answer.read()
                return answer.status

        return list(await asyncio.gather(*(one(target) for target in targets)))


def test_bad_input_never_gets_a_5xx_from_the_read_api(read_api: ReadApi) -> None:
    targets = bad_requests()
    found = asyncio.run(statuses(read_api.url, read_api.key, targets))
    server_errors = [(t[:120], s) for t, s in zip(targets, found, strict=True) if s >= 500]
    assert not server_errors
    assert all(400 <= status < 500 or status == 200 for status in found)


@pytest.mark.parametrize("family", ["/products", "/warehouse", "/crm", "/internal"])
def test_bad_input_gets_the_upstreams_own_answer(
    upstream: SandboxHandle, read_api: ReadApi, family: str
) -> None:
    requests = [(target, {}) for target in bad_requests() if target.startswith(family)]
    assert requests
    compare_all(upstream, read_api, requests, both_keys(upstream, read_api))


@pytest.mark.parametrize(
    "path",
    [
        PRODUCTS_LIST,
        DATA_WAREHOUSE_DIGITAL_ASSETS,
        LEADS,
        MANUALS.path,
        "/healthz",
        "/metrics",
    ],
)
def test_every_405_names_get_in_its_allow_header_in_the_familys_style(
    read_api: ReadApi, path: str
) -> None:
    headers = {"Authorization": f"Bearer {read_api.key}"}
    with httpx.Client(headers=headers) as client:
        for method in ("POST", "PUT", "PATCH", "DELETE", "TRACE"):
            answer = client.request(method, f"{read_api.url}{path}")
            assert answer.status_code == 405, (method, path)
            assert answer.headers["allow"] == "GET", (method, path)
            body = answer.json()
            if path.startswith("/products"):
                assert body["errors"][0]["code"] == "METHOD_NOT_ALLOWED"
            elif path.startswith("/warehouse"):
                assert body["success"] is False and body["errors"]
            else:
                assert body["type"] == "/problems/method-not-allowed"


@pytest.mark.parametrize(
    "path", [PRODUCTS_LIST, unit_path("ventilation"), PAIRINGS.path, DATA_WAREHOUSE_DIGITAL_ASSETS]
)
def test_the_largest_documented_page_is_answered_and_one_more_is_a_400(
    read_api: ReadApi, path: str
) -> None:
    headers = {"Authorization": f"Bearer {read_api.key}"}
    document = httpx.get(f"{read_api.url}/openapi.json", headers=headers).json()
    parameters = document["paths"][path]["get"]["parameters"]
    largest = next(p for p in parameters if p["name"] == "page")["schema"]["maximum"]
    assert largest == MAX_INTEGER
    for count in (1, 1000):
        last = httpx.get(f"{read_api.url}{path}?page={largest}&count={count}", headers=headers)
        assert last.status_code == 200, last.text[:300]
        body = last.json()
        pagination = body.get("pagination") or body["data"]["pagination"]
        assert pagination["page"] == largest
        beyond = httpx.get(f"{read_api.url}{path}?page={largest + 1}", headers=headers)
        assert beyond.status_code == 400
