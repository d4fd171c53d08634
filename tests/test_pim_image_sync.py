"""pim-image-sync: product images mirrored into the bucket, and the job launched by the API."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb

from ductwork.settings import HomeSettings
from pipelines.definitions import ALL_ASSETS
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer, resources_for


def mirror_images(home: Path, upstream: SandboxHandle, store: ObjectStoreServer) -> dict:
    result = dg.materialize(
        ALL_ASSETS, selection="product_images", resources=resources_for(home, upstream.url, store)
    )
    assert result.success
    event = result.get_asset_materialization_events()[0].event_specific_data.materialization
    return {key: value.value for key, value in event.metadata.items()}


def test_images_land_under_images_sku_and_unchanged_ones_are_not_uploaded_again(
    upstream: SandboxHandle, object_store: ObjectStoreServer, synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "warehouse.duckdb").write_bytes(
        HomeSettings(home=synced_home).warehouse_path.read_bytes()
    )
    upstream.state.last_pim_start = None  # no cooldown left from other tests
    first = mirror_images(home, upstream, object_store)
    expected = sum(len(u["images"]) for units in upstream.state.units.values() for u in units)
    assert first["uploaded"] == expected > 0
    assert first["failed"] == 0

    s3 = object_store.resource().client()
    listed = s3.list_objects_v2(Bucket=object_store.bucket, Prefix="images/")
    sample = next(u for u in upstream.state.units["indoor-units"] if u["images"])
    key = f"images/{sample['sku']}/0.png"
    assert listed["KeyCount"] > 0
    body = s3.get_object(Bucket=object_store.bucket, Key=key)["Body"].read()
    assert body.startswith(b"\x89PNG")

    upstream.state.last_pim_start = None
    second = mirror_images(home, upstream, object_store)
    assert second["uploaded"] == 0
    assert second["unchanged"] == expected
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        statuses = con.execute("SELECT DISTINCT status FROM product_images").fetchall()
    assert statuses == [("unchanged",)]
