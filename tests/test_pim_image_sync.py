"""pim-image-sync: product images mirrored into the bucket, and the job launched by the API.

Runs the asset against real sandboxes (one with odd images added) and moto's S3 server; a
failing upload comes from an S3 endpoint in front of moto that denies some writes.
"""

from __future__ import annotations

import asyncio
import select
import shutil
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import dagster as dg
import duckdb
import pytest

from assets.product_images import image_metadata, without_url_queries
from assets.product_images import mirror_images as mirror
from assets.resources import ImageSources, ObjectStore
from ductwork.contract.paths import UNIT_SLUGS
from ductwork.settings import HomeSettings
from ductwork.upstream.image_fetch import Image, ImageFetcher
from ductwork.upstream.image_policy import ImagePolicy, image_key
from pipelines.definitions import ALL_ASSETS
from sandbox.odd_media import OddImages, add_odd_images
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer, resources_for
from tests.helpers.denying_store import DenyingStore, denying_store

UNIT_ASSETS = [slug.replace("-", "_") for slug in UNIT_SLUGS]
MAX_BYTES = 1024 * 1024
# Odd images the guard refuses, and the one whose host keeps failing.
REFUSED = (
    "other_host", "metadata_address", "redirect_away", "not_an_image", "svg", "oversized",
    "oversized_unannounced",
)  # fmt: skip
FAILING = ("failing",)


def mirror_images(
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer, endpoint_url: str | None = None
) -> dict[str, Any]:
    """Materialize ``product_images`` with the sandbox's host:port listed; its metadata."""
    resources = resources_for(home, upstream.url, store)
    resources["image_sources"] = ImageSources(
        hosts=upstream.url.removeprefix("http://"), max_bytes=MAX_BYTES
    )
    if endpoint_url is not None:
        resources["object_store"] = ObjectStore(bucket=store.bucket, endpoint_url=endpoint_url)
    upstream.state.last_pim_start = None  # no cooldown left from an earlier run
    result = dg.materialize(ALL_ASSETS, selection="product_images", resources=resources)
    assert result.success
    event = result.get_asset_materialization_events()[0].event_specific_data.materialization
    return {key: value.value for key, value in event.metadata.items()}


def image_rows(home: Path) -> list[dict[str, Any]]:
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        relation = con.sql("SELECT * FROM product_images ORDER BY source_url")
        return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def copy_home(source: Path, target: Path) -> Path:
    target.mkdir()
    shutil.copyfile(HomeSettings(home=source).warehouse_path, target / "warehouse.duckdb")
    return target


def test_images_land_under_images_sku_and_unchanged_ones_are_not_uploaded_again(
    upstream: SandboxHandle, object_store: ObjectStoreServer, synced_home: Path, tmp_path: Path
) -> None:
    home = copy_home(synced_home, tmp_path / "home")
    first = mirror_images(home, upstream, object_store)
    expected = sum(len(u["images"]) for units in upstream.state.units.values() for u in units)
    assert first["uploaded"] == expected > 0
    assert first["failed"] == 0

    s3 = object_store.resource().client()
    sample = next(u for u in upstream.state.units["indoor-units"] if u["images"])
    key = image_key(sample["sku"], sample["images"][0]["url"])
    stored = s3.get_object(Bucket=object_store.bucket, Key=key)
    assert stored["Body"].read().startswith(b"\x89PNG")
    assert stored["ContentType"] == "image/png"

    second = mirror_images(home, upstream, object_store)
    assert second["uploaded"] == 0
    assert second["unchanged"] == expected
    assert {row["status"] for row in image_rows(home)} == {"unchanged"}


@pytest.fixture(scope="module")
def odd_upstream(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SandboxHandle, OddImages, Path]]:
    """A tiny sandbox whose first indoor unit carries the odd images, and a data folder with
    its units synced (no images mirrored yet)."""
    with object_store.sandbox(5522, "tiny") as handle:
        odd = add_odd_images(handle.state)
        home = tmp_path_factory.mktemp("odd-units")
        resources = resources_for(home, handle.url, object_store)
        assert dg.materialize(ALL_ASSETS, selection=UNIT_ASSETS, resources=resources).success
        yield handle, odd, home


def test_hostile_and_broken_images_are_recorded_and_the_rest_still_land(
    odd_upstream: tuple[SandboxHandle, OddImages, Path],
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    handle, odd, units_home = odd_upstream
    home = copy_home(units_home, tmp_path / "home")
    metadata = mirror_images(home, handle, object_store)

    rows = {row["source_url"]: row for row in image_rows(home)}
    for name in REFUSED:
        row = rows[odd.urls[name]]
        assert (row["status"], row["error"].split(":")[0]) == ("failed", "refused"), name
    assert rows[odd.urls["failing"]]["error"].startswith("download_failed: HTTP 500")
    assert metadata["refused"] == len(REFUSED)
    assert metadata["download_failed"] == len(FAILING)
    assert metadata["failed"] == len(REFUSED) + len(FAILING)
    assert metadata["uploaded"] == len(rows) - metadata["failed"] > 0
    assert odd.urls["failing"] in metadata["first_errors"]

    s3 = object_store.resource().client()
    folder = image_key(odd.sku, "x").rsplit("/", 1)[0] + "/"
    listed = s3.list_objects_v2(Bucket=object_store.bucket, Prefix=folder)["Contents"]
    keys = {obj["Key"] for obj in listed}
    landed = {row["object_key"] for row in rows.values() if row["sku"] == odd.sku and row["md5"]}
    assert landed <= keys
    # Same file name, different URLs: two objects; a climbing name stays in the folder.
    assert rows[odd.urls["same_file_name"]]["object_key"] in keys
    assert rows[odd.urls["climbing_name"]]["object_key"] in keys
    assert len({rows[odd.urls[n]]["object_key"] for n in ("same_file_name", "climbing_name")}) == 2
    assert not any(".." in key for key in keys)
    for obj in listed:
        head = s3.head_object(Bucket=object_store.bucket, Key=obj["Key"])
        assert head["ContentType"] == "image/png" and obj["Size"] <= MAX_BYTES
    everything = s3.list_objects_v2(Bucket=object_store.bucket, Prefix="manuals/x")
    assert everything["KeyCount"] == 0


def test_a_failed_upload_is_counted_and_the_other_images_still_land(
    odd_upstream: tuple[SandboxHandle, OddImages, Path],
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    handle, odd, units_home = odd_upstream
    home = copy_home(units_home, tmp_path / "home")
    folder = image_key(odd.sku, "x").rsplit("/", 1)[0] + "/"
    gate: DenyingStore
    with denying_store(object_store.endpoint_url, object_store.bucket, (folder,)) as (url, gate):
        metadata = mirror_images(home, handle, object_store, endpoint_url=url)

    rows = image_rows(home)
    refused_uploads = [row for row in rows if row["error"] and row["error"].startswith("upload")]
    assert gate.denied_puts >= len(refused_uploads) > 0
    assert {row["sku"] for row in refused_uploads} == {odd.sku}
    assert all("AccessDenied" in row["error"] for row in refused_uploads)
    assert metadata["upload_failed"] == len(refused_uploads)
    others = [row for row in rows if row["sku"] != odd.sku]
    assert others and {row["status"] for row in others} == {"uploaded"}
    assert metadata["uploaded"] == len(others)
    s3 = object_store.resource().client()
    for row in others[:: max(1, len(others) // 10)]:
        s3.head_object(Bucket=object_store.bucket, Key=row["object_key"])


class HeldBodies:
    """Counts images between the end of their download and the end of their upload."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.uploads = 0

    def downloaded(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def uploaded(self, **_: object) -> None:  # a botocore event handler
        with self._lock:
            self.now -= 1
            self.uploads += 1


class CountingFetcher(ImageFetcher):
    """The real fetcher, noting each downloaded body."""

    def __init__(self, held: HeldBodies, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = held

    async def fetch(self, url: str) -> Image:
        image = await super().fetch(url)
        self._held.downloaded()
        return image


def test_at_most_at_once_image_bodies_are_held_between_download_and_upload(
    odd_upstream: tuple[SandboxHandle, OddImages, Path], object_store: ObjectStoreServer
) -> None:
    handle, odd, _ = odd_upstream
    images = [
        (unit["sku"], image["url"], image["kind"])
        for units in handle.state.units.values()
        for unit in units
        if unit["sku"] != odd.sku
        for image in unit["images"]
    ][:150]
    held = HeldBodies()
    s3 = object_store.resource().client()
    s3.meta.events.register("after-call.s3.PutObject", held.uploaded)
    policy = ImagePolicy.for_upstream(handle.url, handle.url.removeprefix("http://"), MAX_BYTES)
    at_once = 3

    async def run() -> list[dict[str, Any]]:
        async with CountingFetcher(held, policy, concurrency=8) as fetcher:
            return await mirror(fetcher, s3, object_store.bucket, images, {}, at_once)

    rows = asyncio.run(run())
    assert [row["status"] for row in rows] == ["uploaded"] * len(images)
    assert held.uploads == len(images) and held.now == 0
    assert 1 <= held.most <= at_once


PNG = b"\x89PNG\r\n\x1a\n" + bytes(56)
SIGNED_QUERY = "X-Amz-Credential=AKIDEXAMPLE-20260101&X-Amz-Signature=0f1e2d3c4b5a"


class ImageHost(ThreadingHTTPServer):
    """A local image server: ``/denied/...`` answers 403 (as a host refusing a signed URL),
    any other path a PNG. The requests being answered are counted per ``Host`` header, the
    most at once kept.

    Requests are held in rounds: a round is answered once ``hold`` requests are held and every
    connection the client has opened so far (accepted, or waiting to be) has sent its request,
    so a client over its limit is seen whenever its extra requests were sent with the others.
    """

    daemon_threads = True

    def __init__(self, hold: int = 1) -> None:
        super().__init__(("127.0.0.1", 0), _ImageHandler)
        self.netloc = f"127.0.0.1:{self.server_port}"
        self.hold = hold
        self.held_too_long = False
        self.most: Counter[str] = Counter()
        self._now: Counter[str] = Counter()
        self._state = threading.Condition()
        self._accepted = 0  # connections taken from the listening socket
        self._arrived = 0  # requests read from them (one per connection: HTTP/1.0)
        self._round = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        with self._state:  # taken and counted at once, as the rounds see the backlog
            taken = super().get_request()
            self._accepted += 1
            self._state.notify_all()
            return taken

    def held_request(self, host: str) -> None:
        """Count a request from ``host`` in, hold it until its round is answered, count it
        out (before its answer: a client may send its next request only once it has one)."""
        with self._state:
            self._now[host] += 1
            self._arrived += 1
            self.most[host] = max(self.most[host], self._now[host])
            own = self._round
            while self._round == own:
                if self._complete_round():
                    self._round += 1
                    self._state.notify_all()
                elif not self._state.wait(timeout=10):
                    self.held_too_long = True
                    self._round += 1
                    self._state.notify_all()
            self._now[host] -= 1

    def _complete_round(self) -> bool:
        waiting, _, _ = select.select([self.socket], [], [], 0)
        held = sum(self._now.values())
        return held >= self.hold and self._arrived == self._accepted and not waiting


class _ImageHandler(BaseHTTPRequestHandler):
    server: ImageHost

    def do_GET(self) -> None:
        self.server.held_request(self.headers.get("Host", ""))
        status, body = (403, b"denied") if self.path.startswith("/denied/") else (200, PNG)
        self.send_response(status)
        self.send_header("Content-Type", "image/png" if status == 200 else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads the counts, not a log


@contextmanager
def image_host(hold: int = 1) -> Iterator[ImageHost]:
    server = ImageHost(hold)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def mirror_from(
    host: ImageHost,
    object_store: ObjectStoreServer,
    images: list[tuple[str, str, str | None]],
    at_once: int,
) -> list[dict[str, Any]]:
    """``mirror_images`` of ``images`` with ``host`` listed, into the test bucket."""
    policy = ImagePolicy.for_upstream("http://upstream.invalid", host.netloc, MAX_BYTES)
    s3 = object_store.resource().client()

    async def run() -> list[dict[str, Any]]:
        async with ImageFetcher(policy, concurrency=8, timeout_s=20, retries=0) as fetcher:
            return await mirror(fetcher, s3, object_store.bucket, images, {}, at_once)

    return asyncio.run(run())


def test_a_failed_image_keeps_no_query_of_its_url_in_its_error_or_the_metadata(
    object_store: ObjectStoreServer,
) -> None:
    with image_host() as host:
        signed = f"http://{host.netloc}/denied/unit.png?{SIGNED_QUERY}"
        unparsable = f"http://[::1/unit.png?{SIGNED_QUERY}"  # refused before any request
        fine = f"http://{host.netloc}/unit.png?{SIGNED_QUERY}"
        rows = mirror_from(
            host, object_store, [("SKU-1", url, "photo") for url in (signed, unparsable, fine)], 3
        )

    by_url = {row["source_url"]: row for row in rows}
    assert by_url[signed]["error"].startswith("download_failed: HTTP 403")
    assert by_url[unparsable]["error"].startswith("refused: not a usable URL")
    assert by_url[fine]["status"] == "uploaded"
    metadata = image_metadata(rows)
    assert metadata["failed"] == 2
    errors = str(metadata["first_errors"])
    assert f"http://{host.netloc}/denied/unit.png: download_failed" in errors
    assert "http://[::1/unit.png: refused" in errors
    for text in [errors, *(row["error"] or "" for row in rows)]:
        assert "X-Amz" not in text and "?" not in text, text


def test_without_url_queries_cuts_every_http_urls_query_from_a_text_and_nothing_else() -> None:
    # A real client error quotes the whole URL it asked for.
    with image_host() as host:
        url = f"http://{host.netloc}/denied/photo.png?{SIGNED_QUERY}"
        error = asyncio.run(_client_error_for(url))
    assert SIGNED_QUERY in error
    assert SIGNED_QUERY not in without_url_queries(error)
    assert f"http://{host.netloc}/denied/photo.png" in without_url_queries(error)
    cases = {
        f"url='https://cdn.example/a/b.png?{SIGNED_QUERY}' refused": (
            "url='https://cdn.example/a/b.png' refused"
        ),
        f'Could not connect to "HTTP://s3.example/b/k#frag?{SIGNED_QUERY}"': (
            'Could not connect to "HTTP://s3.example/b/k"'
        ),
        f"<http://a.example/x?{SIGNED_QUERY}> and http://b.example/y?t=1 then text? no": (
            "<http://a.example/x> and http://b.example/y then text? no"
        ),
    }
    for text, expected in cases.items():
        assert without_url_queries(text) == expected
    for untouched in ("HTTP 500; gave up after 3 attempts", "ftp://files.example/a?b kept"):
        assert without_url_queries(untouched) == untouched


async def _client_error_for(url: str) -> str:
    """The text of the error aiohttp raises for the error status ``url`` answers."""
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)):
                pass
        except aiohttp.ClientResponseError as exc:
            return str(exc)
    raise AssertionError(f"{url} did not fail")


def test_downloads_from_one_host_are_never_more_than_at_once_in_flight(
    object_store: ObjectStoreServer,
) -> None:
    at_once = 3
    # Requests are answered in rounds of at least ``at_once``: the limit is reached in every
    # round, and a client over it has its extra requests counted in before any is answered.
    with image_host(hold=at_once) as host:
        images = [
            (f"SKU-{n}", f"http://{host.netloc}/{n}.png", "photo") for n in range(4 * at_once)
        ]
        rows = mirror_from(host, object_store, images, at_once)

    assert not host.held_too_long, "fewer than at_once downloads were ever in flight"
    assert [row["status"] for row in rows] == ["uploaded"] * len(images)
    assert dict(host.most) == {host.netloc: at_once}
