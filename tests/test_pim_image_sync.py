"""pim-image-sync: product images mirrored into the bucket, and the job launched by the API.

Runs the asset against real sandboxes (one with odd images added) and moto's S3 server; a
failing upload comes from an S3 endpoint in front of moto that denies some writes.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from assets.product_images import mirror_images as mirror
from assets.resources import ImageSources, ObjectStore
from ductwork.contract.paths import UNIT_SLUGS
from ductwork.settings import HomeSettings
from ductwork.upstream.image_fetch import Image, ImageFetcher, ImagePolicy, image_key
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
