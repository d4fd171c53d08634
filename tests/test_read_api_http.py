"""HTTP behaviour of the read API beyond the upstream's shapes: scopes, ETags, ids, health."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.encoding import quote_sku
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from sandbox.local_server import serving
from serve import fast_answers
from serve.app import create_app
from tests.conftest import UNLIMITED, ReadApi, home_with_published_snapshot


def test_a_key_without_the_crm_scope_gets_403_problem_on_leads(read_api: ReadApi) -> None:
    key = KeyFile(HomeSettings(home=read_api.home).keys_path).create("catalog-only", ["catalog"])
    headers = {"Authorization": f"Bearer {key}"}
    leads = httpx.get(f"{read_api.url}/crm/v1.1/leads", headers=headers)
    products = httpx.get(f"{read_api.url}/products/v2.0/products", headers=headers)
    assert leads.status_code == 403
    assert leads.json()["type"] == "/problems/forbidden"
    assert products.status_code == 200


def test_a_revoked_key_gets_401_at_once(read_api: ReadApi) -> None:
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    key = store.create("short-lived", ["all"])
    url = f"{read_api.url}/products/v2.0/products"
    assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    store.revoke("short-lived")
    assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 401


def test_the_gzip_etag_answers_304_and_every_answer_has_a_request_id(
    read_api: ReadApi,
) -> None:
    headers = {"Authorization": f"Bearer {read_api.key}", "Accept-Encoding": "gzip"}
    url = f"{read_api.url}/products/v2.0/indoor-units?count=1000"
    first = httpx.get(url, headers=headers)
    assert first.headers["content-encoding"] == "gzip"
    assert first.headers["x-request-id"]
    assert first.headers["etag"].endswith('-gzip"')
    again = httpx.get(url, headers={**headers, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    missing = httpx.get(f"{read_api.url}/products/v2.0/indoor-units/nope", headers=headers)
    assert missing.headers["x-request-id"] != first.headers["x-request-id"]


def test_readiness_reports_the_snapshot_and_is_503_before_the_first_publish(
    read_api: ReadApi, tmp_path: Path
) -> None:
    ready = httpx.get(f"{read_api.url}/readyz").json()
    assert ready["status"] == "ready" and ready["snapshot"]
    with serving(create_app(HomeSettings(home=tmp_path))) as url:
        assert httpx.get(f"{url}/readyz").status_code == 503
        assert httpx.get(f"{url}/healthz").status_code == 200
        empty = httpx.get(f"{url}/products/v2.0/products", headers={"Authorization": "Bearer x"})
        assert empty.status_code == 401


def test_metrics_count_answered_requests(read_api: ReadApi) -> None:
    httpx.get(f"{read_api.url}/products/v2.0/products")
    ops = {"Authorization": f"Bearer {read_api.key}"}  # the key holds the ops scope
    text = httpx.get(f"{read_api.url}/metrics", headers=ops).text
    assert 'ductwork_requests_total{family="products",status="401"}' in text
    assert "ductwork_snapshot_age_seconds" in text


def test_found_sku_lookups_keep_their_headers_304_scopes_and_key_checks(read_api: ReadApi) -> None:
    headers = {"Authorization": f"Bearer {read_api.key}"}
    listed = httpx.get(f"{read_api.url}/products/v2.0/indoor-units?count=1", headers=headers)
    sku = listed.json()["data"][0]["sku"]
    url = f"{read_api.url}/products/v2.0/units/{quote_sku(sku)}"
    found = httpx.get(url, headers=headers)
    assert found.status_code == 200 and found.json()["data"]["sku"] == sku
    assert found.headers["etag"] != listed.headers["etag"]  # another body
    assert found.headers["x-snapshot-version"] and found.headers["x-request-id"]
    assert found.headers["cache-control"] == "private, no-cache"
    by_type = httpx.get(
        f"{read_api.url}/products/v2.0/indoor-units/{quote_sku(sku)}", headers=headers
    )
    assert by_type.content == found.content
    assert by_type.headers["etag"] == found.headers["etag"]
    again = httpx.get(url, headers={**headers, "If-None-Match": found.headers["etag"]})
    assert again.status_code == 304
    crm_only = KeyFile(HomeSettings(home=read_api.home).keys_path).create("crm-only", ["crm"])
    assert httpx.get(url, headers={"Authorization": f"Bearer {crm_only}"}).status_code == 403
    assert httpx.get(url, headers={"Authorization": "Bearer not-a-key"}).status_code == 401


def test_the_short_path_answers_exactly_as_the_routes_do(read_api: ReadApi) -> None:
    """Lookups and plain list pages taken by the short path (serve/fast_answers.py) equal the
    answers of the same app without it (the routes answer everything there)."""
    headers = {"Authorization": f"Bearer {read_api.key}"}
    routes_only = create_app(HomeSettings(home=read_api.home), UNLIMITED)
    routes_only.user_middleware = [
        m for m in routes_only.user_middleware if m.cls is not fast_answers.FastAnswers
    ]
    first_sku = httpx.get(
        f"{read_api.url}/products/v2.0/indoor-units?count=1", headers=headers
    ).json()["data"][0]["sku"]
    paths = [
        "/products/v2.0/products",
        "/products/v2.0/products?count=7&page=3",
        "/products/v2.0/indoor-units?page=2",
        "/products/v2.0/ventilation?count=1000&page=999",  # past the end
        "/products/v2.0/indoor-units?count=5&count=6",  # repeated: the routes decide
        "/products/v2.0/indoor-units?count=0",  # invalid: the routes' error
        f"/products/v2.0/indoor-units/{quote_sku(first_sku)}",
        f"/products/v2.0/units/{quote_sku(first_sku)}",
        "/warehouse/v1.0/digital-assets?count=100&page=1",
        "/warehouse/v1.0/digital-assets?count=100&page=1",  # now from the cache
        "/warehouse/v1.0/digital-assets?count=33&page=31",  # across a cached chunk's edge
        "/warehouse/v1.0/digital-assets?count=33&page=31",
    ]
    with serving(routes_only) as routes_url:
        for path in paths:
            short = httpx.get(read_api.url + path, headers=headers)
            routed = httpx.get(routes_url + path, headers=headers)
            assert (short.status_code, short.content) == (routed.status_code, routed.content)
            assert short.headers.get("etag") == routed.headers.get("etag"), path
            assert short.headers["content-type"] == routed.headers["content-type"], path
    without_scope = KeyFile(HomeSettings(home=read_api.home).keys_path).create("crm-only", ["crm"])
    refused = httpx.get(
        f"{read_api.url}/warehouse/v1.0/digital-assets?count=100&page=1",
        headers={"Authorization": f"Bearer {without_scope}"},
    )
    assert refused.status_code == 403


def test_a_fault_in_the_short_path_is_answered_by_the_routes(
    read_api: ReadApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short path sits outside the framework's error layer: a bug there must neither drop
    the request nor answer 500, but hand it to the routes."""
    headers = {"Authorization": f"Bearer {read_api.key}"}
    path = "/products/v2.0/indoor-units?count=3&page=2"
    expected = httpx.get(read_api.url + path, headers={**headers, "If-None-Match": '"x"'})

    async def broken(*_: object) -> bytes:
        raise RuntimeError("a fault in the short path")

    monkeypatch.setattr(fast_answers, "_read", broken)
    answered = httpx.get(read_api.url + path, headers=headers)
    assert (answered.status_code, answered.content) == (200, expected.content)
    assert answered.headers["x-request-id"]


def test_a_stopped_read_api_closes_its_snapshot_and_lets_it_go(
    synced_home: Path, tmp_path: Path
) -> None:
    copy = home_with_published_snapshot(synced_home, tmp_path)
    app = create_app(HomeSettings(home=tmp_path))
    with serving(app) as url:
        assert httpx.get(f"{url}/readyz").status_code == 200
        assert snapshots.in_use(copy)
    assert not snapshots.in_use(copy)
