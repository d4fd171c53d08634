"""The short path (serve/fast_answers.py) answers byte for byte as the routes do.

Three servers over one synced data folder: the whole app; the app without the short path
(the routes answer everything); and the short path as it stands in front of the app's layers,
alone before a stand-in that answers 599 to whatever it declines, so each comparison proves
which side answered (and that the headers of the layers it skips are all there).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from ductwork.contract.encoding import quote_sku
from ductwork.settings import HomeSettings
from sandbox.local_server import serving
from serve.app import create_app
from serve.data_age import AgeRule
from serve.failed_requests import RefusedClients
from serve.fast_answers import FastAnswers, FastAnswersInFront
from serve.gzip_cache import AnswerCache
from tests.conftest import UNLIMITED, ReadApi

DECLINED = 599
# Set per connection or per moment by the server, not by the answer; and nosniff, added to
# every answer by the app's outermost layer, which the short path alone runs without.
VARYING = {b"date", b"server", b"x-request-id", b"x-content-type-options"}


class ShortPathOnly:
    """The short path in front of a stand-in that answers 599 to every request it declines;
    ``app`` supplies the state the short path reads, as Starlette hands it over."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.short = FastAnswersInFront(
            self._declined,
            metrics=app.state.metrics,
            refused=RefusedClients(),
            data_age=AgeRule(None),
            gzip_answers=AnswerCache(),
            cors=False,
        )

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: the app's start and stop
            return
        scope["app"] = self.app
        await self.short(scope, receive, send)

    @staticmethod
    async def _declined(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": DECLINED, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def routes_only(settings: HomeSettings) -> FastAPI:
    """The whole app but its short path: the routes answer every request."""
    app = create_app(settings, UNLIMITED)
    app.user_middleware = [m for m in app.user_middleware if not issubclass(m.cls, FastAnswers)]
    return app


@dataclass(frozen=True)
class Servers:
    whole: str
    routes: str
    short: str
    key: str


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes  # as sent: still compressed when it was

    def header(self, name: str) -> str:
        """The first value of header ``name``."""
        return next(value.decode() for key, value in self.headers if key == name.encode())


@pytest.fixture(scope="module")
def servers(read_api: ReadApi) -> Iterator[Servers]:
    settings = HomeSettings(home=read_api.home)
    with (
        serving(routes_only(settings)) as routes,
        serving(ShortPathOnly(create_app(settings, UNLIMITED))) as short,
    ):
        yield Servers(read_api.url, routes, short, read_api.key)


def fetch(base: str, path: str, headers: dict[str, str]) -> Answer:
    """One answer as it came over the wire: every header line in order, the raw body; not
    compressed unless ``headers`` ask for it (httpx asks by default)."""
    headers = {"Accept-Encoding": "identity", **headers}
    with httpx.Client() as client, client.stream("GET", base + path, headers=headers) as answer:
        body = b"".join(answer.iter_raw())
        kept = [(k.lower(), v) for k, v in answer.headers.raw if k.lower() not in VARYING]
        return Answer(answer.status_code, kept, body)


def some_sku(servers: Servers, slug: str) -> str:
    url = f"{servers.routes}/products/v2.0/{slug}?count=1&page=2"
    answer = httpx.get(url, headers={"Authorization": f"Bearer {servers.key}"})
    return answer.json()["data"][0]["sku"]


def an_asset_time(servers: Servers) -> str:
    url = f"{servers.routes}/warehouse/v1.0/digital-assets?count=1&page=20"
    answer = httpx.get(url, headers={"Authorization": f"Bearer {servers.key}"})
    return quote(answer.json()["data"][0]["updatedAt"], safe=":")


def test_lookups_found_unknown_and_revalidated_are_the_routes_answers(servers: Servers) -> None:
    auth = {"Authorization": f"Bearer {servers.key}"}
    indoor = quote_sku(some_sku(servers, "indoor-units"))
    outdoor = quote_sku(some_sku(servers, "outdoor-units"))
    etag = httpx.get(f"{servers.routes}/products/v2.0/units/{indoor}", headers=auth).headers["etag"]
    cases = [
        (f"/products/v2.0/units/{indoor}", {}, 200),
        (f"/products/v2.0/indoor-units/{indoor}", {}, 200),
        (f"/products/v2.0/units/{indoor}", {"If-None-Match": etag}, 304),
        (f"/products/v2.0/indoor-units/{indoor}", {"If-None-Match": etag}, 304),
        (f"/products/v2.0/units/{indoor}", {"If-None-Match": '"another"'}, 200),
        ("/products/v2.0/units/NO-SUCH-SKU-1", {}, 404),
        ("/products/v2.0/units/NO-SUCH-SKU-1", {"If-None-Match": etag}, 404),
        ("/products/v2.0/indoor-units/NO-SUCH-SKU-1", {}, 404),
        (f"/products/v2.0/indoor-units/{outdoor}", {}, 404),  # a SKU of another type
        ("/products/v2.0/units/" + "X" * 300, {}, 404),  # the message cuts it at 80
    ]
    for path, extra, status in cases:
        headers = {**auth, **extra}
        routed = fetch(servers.routes, path, headers)
        assert routed.status == status, path
        for _ in range(2):  # the second from what the first made ready
            assert fetch(servers.short, path, headers) == routed, (path, extra)


def test_list_pages_plain_filtered_and_revalidated_are_the_routes_answers(
    servers: Servers,
) -> None:
    auth = {"Authorization": f"Bearer {servers.key}"}
    after = an_asset_time(servers)
    assets = "/warehouse/v1.0/digital-assets"
    other = httpx.get(servers.routes + assets, headers=auth).headers["etag"]  # another page's
    own = "its own ETag"
    cases = [
        ("/products/v2.0/products?count=7&page=3", {}, 200),
        ("/products/v2.0/indoor-units?count=100&page=2", {}, 200),
        ("/products/v2.0/indoor-units?count=100&page=2", {"If-None-Match": own}, 304),
        ("/products/v2.0/indoor-units?count=100&page=2", {"If-None-Match": other}, 200),
        (f"{assets}?count=100&page=2", {}, 200),
        (f"{assets}?count=100&page=2", {"If-None-Match": own}, 304),
        (f"{assets}?count=100&updatedAfter={after}", {}, 200),
        (f"{assets}?updatedAfter={after}&count=33&page=4", {}, 200),
        (f"{assets}?count=100&updatedAfter={after.replace('Z', '%2B00%3A00')}&page=2", {}, 200),
        (f"{assets}?count=100&updatedAfter={after}&page=2", {"If-None-Match": own}, 304),
        (f"{assets}?count=100&updatedAfter={after}&page=2", {"If-None-Match": other}, 200),
        (f"{assets}?count=1000&updatedAfter=2999-01-01T00:00:00Z", {}, 200),  # nothing later
        (f"{assets}?count=100&updatedAfter={after}&page=100000", {}, 200),  # past the end
    ]
    for path, extra, status in cases:
        if extra.get("If-None-Match") == own:
            extra = {"If-None-Match": fetch(servers.routes, path, auth).header("etag")}
        headers = {**auth, **extra}
        routed = fetch(servers.routes, path, headers)
        assert routed.status == status, (path, extra)
        for _ in range(2):  # the second from what the first made ready
            assert fetch(servers.short, path, headers) == routed, (path, extra)


def test_bad_or_other_parameters_still_reach_the_routes_validation(servers: Servers) -> None:
    auth = {"Authorization": f"Bearer {servers.key}"}
    assets = "/warehouse/v1.0/digital-assets"
    declined = [
        (f"{assets}?updatedAfter=yesterday", 400),
        (f"{assets}?updatedAfter=2024-01-01", 400),  # no time
        (f"{assets}?updatedAfter=", 400),
        (f"{assets}?count=0&updatedAfter=2024-01-01T00:00:00Z", 400),
        # Repeated: the routes take the last one.
        (f"{assets}?updatedAfter=2024-01-01T00:00:00Z&updatedAfter=2025-01-01T00:00:00Z", 200),
        (f"{assets}?updatedafter=2024-01-01T00:00:00Z", 200),  # not a parameter: ignored
        ("/products/v2.0/units/", 404),
        ("/products/v2.0/indoor-units/", 404),
    ]
    for path, status in declined:
        assert fetch(servers.short, path, auth).status == DECLINED, path
        whole = fetch(servers.whole, path, auth)
        assert whole.status == status, path
        assert whole == fetch(servers.routes, path, auth), path


def test_gzip_answers_of_the_short_path_are_the_routes_gzip_answers(servers: Servers) -> None:
    headers = {"Authorization": f"Bearer {servers.key}", "Accept-Encoding": "gzip"}
    after = an_asset_time(servers)
    for path in (
        "/products/v2.0/indoor-units?count=100&page=2",
        f"/warehouse/v1.0/digital-assets?count=100&page=3&updatedAfter={after}",
        f"/products/v2.0/units/{quote_sku(some_sku(servers, 'indoor-units'))}",
    ):
        routed = fetch(servers.routes, path, headers)
        for _ in range(2):  # compressed, then from the compressed-answer cache
            whole = fetch(servers.whole, path, headers)
            assert whole == routed, path
            assert fetch(servers.short, path, headers) == routed, path
        plain = fetch(servers.routes, path, {"Authorization": headers["Authorization"]})
        encoded = dict(whole.headers).get(b"content-encoding")
        assert (gzip.decompress(whole.body) if encoded == b"gzip" else whole.body) == plain.body
