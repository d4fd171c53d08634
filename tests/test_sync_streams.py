"""Syncing every stream from a real sandbox: completeness, metadata, incremental runs and
reconciliation after the upstream changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from ductwork.contract.encoding import format_datetime, loads, parse_datetime
from ductwork.contract.paths import UNIT_SLUGS
from ductwork.settings import HomeSettings
from ductwork.snapshots import stamp
from ductwork.streams.registry import PAIRINGS, PRODUCTS
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer, resources_for
from tests.helpers.api import (
    all_assets,
    both_keys,
    compare_all,
    mirror_requests,
    unit_records,
    walk_requests,
)
from tests.helpers.sync import api_over, metadata_by_asset, mutate, sync

STREAMS_WITH_ROWS = (
    "catalog_items", "indoor_units", "pairings", "warehouse_digital_assets",
    "warehouse_submittals", "crm_leads", "crm_lead_details", "internal_manuals",
)  # fmt: skip


@pytest.fixture
def fresh_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, for tests that change its data."""
    with object_store.sandbox(77) as handle:
        yield handle


def test_full_sync_stores_every_unit_record_exactly_as_received(
    upstream: SandboxHandle, synced_home: Path
) -> None:
    snapshot = HomeSettings(home=synced_home).warehouse_path
    with duckdb.connect(str(snapshot), read_only=True) as con:
        for slug in UNIT_SLUGS:
            stored = {
                sku: loads(record)
                for sku, record in con.execute(
                    "SELECT sku, record FROM units WHERE unit_type = ?", [slug]
                ).fetchall()
            }
            received = {record["sku"]: record for record in unit_records(upstream, slug)}
            assert stored == received, slug


def test_sync_metadata_counts_rows_and_requests_and_never_shows_the_key(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    result = sync(tmp_path, upstream, object_store)
    metadata = metadata_by_asset(result)
    for name in STREAMS_WITH_ROWS:
        assert metadata[name]["dagster/row_count"] > 0, name
    assert metadata["warehouse_digital_assets"]["requests"] >= 1
    assert metadata["crm_leads"]["cursor_created_date"]
    checks = {check.check_name: check for check in result.get_asset_check_evaluations()}
    failed = [
        name for name, check in checks.items()
        if not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    ]  # fmt: skip
    assert not failed, failed
    # The sandbox plants pairings that name SKUs the catalog lacks: a warning that lists them.
    resolve = checks["pairing_products_resolve_to_catalog"]
    assert not resolve.passed and resolve.severity == dg.AssetCheckSeverity.WARN
    assert resolve.metadata["found"].value > 0
    for event in result.all_events:
        assert UPSTREAM_KEY not in str(event), event.event_type_value


def test_no_change_incremental_run_asks_little_of_the_upstream_and_writes_nothing(
    fresh_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    first = metadata_by_asset(sync(tmp_path, fresh_upstream, object_store))
    warehouse = HomeSettings(home=tmp_path).warehouse_path
    published = warehouse.stat()
    again = metadata_by_asset(sync(tmp_path, fresh_upstream, object_store))
    # Nothing reached the warehouse file, so the publish confirmed the snapshot unread.
    after = warehouse.stat()
    assert (after.st_ctime_ns, after.st_size) == (published.st_ctime_ns, published.st_size)
    assert not stamp.write_ahead_log(warehouse).exists()
    assert first["serving_snapshot"]["new_copy"] and first["serving_snapshot"]["fingerprinted"]
    assert not again["serving_snapshot"]["new_copy"]
    assert not again["serving_snapshot"]["fingerprinted"]
    # Each list fetched once and found unchanged without parsing it.
    for name in [*PRODUCTS.assets, *PAIRINGS.assets]:
        assert first[name]["reads"] == 1 and not first[name]["unchanged"], name
        assert again[name]["reads"] == 0 and again[name]["unchanged"], name
        assert again[name]["requests"] == again[name]["pages"] == first[name]["pages"], name
        assert again[name]["dagster/row_count"] == first[name]["dagster/row_count"], name
    assert again["pairings"]["product_slots"] == first["pairings"]["product_slots"]
    for name in ("internal_indoor_models", "internal_contractors", "internal_manuals"):
        assert not first[name]["unchanged"] and again[name]["unchanged"], name
    assert again["warehouse_digital_assets"]["requests"] <= 2
    assert again["warehouse_digital_assets"]["rows_upserted"] == 0
    assert again["warehouse_submittals"]["requests"] == 0
    derived = first["warehouse_submittals"]["requests_derived"]
    assert derived > 0 and again["warehouse_submittals"]["requests_derived"] == derived
    assert again["crm_lead_details"]["requests"] == 0
    assert again["crm_leads"]["leads_new_or_resumed"] == 0


def test_incremental_then_reconcile_follow_every_kind_of_upstream_change(
    fresh_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    sync(tmp_path, fresh_upstream, object_store)
    newest_before = fresh_upstream.state.leads.keys[-1][0]
    changed = mutate(
        fresh_upstream,
        assets_updated=40, assets_added=25, assets_deleted=15,
        leads_added=120, leads_changed=60, products_changed=10,
    )  # fmt: skip

    after = metadata_by_asset(sync(tmp_path, fresh_upstream, object_store))
    # Changed units change the requests that name them: those submittals are fetched again.
    assert after["warehouse_submittals"]["requests_fetched"] > 0
    upstream_assets = {a["assetId"]: a for a in all_assets(fresh_upstream)}
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        assets = dict(con.execute("SELECT asset_id, record FROM digital_assets").fetchall())
        leads = dict(con.execute("SELECT id, record FROM leads").fetchall())
    for asset_id, asset in upstream_assets.items():
        assert loads(assets[asset_id]) == asset  # every change and addition arrived
    window_start = format_datetime(parse_datetime(newest_before) - timedelta(days=30))
    items = fresh_upstream.state.lead_items
    recent = [i for i in changed["leads_changed"] if items[i]["CreatedDate"] > window_start]
    assert recent, "the sandbox should change some recent leads"
    for ident in [*changed["leads_added"], *recent]:
        assert loads(leads[ident]) == items[ident]  # new leads and changes in the window
    with api_over(tmp_path) as api:
        catalog = [req for req in mirror_requests(fresh_upstream) if req[0].startswith("/products")]
        compare_all(fresh_upstream, api, catalog, both_keys(fresh_upstream, api))

    sync(tmp_path, fresh_upstream, object_store, reconcile=True)
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        deleted = con.execute(
            "SELECT count(*) FROM digital_assets WHERE deleted_at IS NOT NULL"
        ).fetchall()[0][0]
    assert deleted == 15
    with api_over(tmp_path) as api:
        requests = mirror_requests(fresh_upstream) + walk_requests(fresh_upstream, 1000)
        compare_all(fresh_upstream, api, requests, both_keys(fresh_upstream, api))


def test_lead_walk_across_thousands_sharing_one_created_date_loses_and_repeats_nothing(
    upstream: SandboxHandle, synced_home: Path
) -> None:
    dates = [key[0] for key in upstream.state.leads.keys]
    busiest = Counter(dates).most_common(1)[0][0]
    assert dates.count(busiest) > 2_000
    with duckdb.connect(str(HomeSettings(home=synced_home).warehouse_path), read_only=True) as con:
        ids = [row[0] for row in con.execute("SELECT id FROM leads").fetchall()]
        shared = con.execute(
            "SELECT count(*) FROM leads WHERE created_date_text = ?", [busiest]
        ).fetchall()[0][0]
    assert len(ids) == len(set(ids)) == len(upstream.state.leads.keys)
    assert shared == dates.count(busiest)


def test_a_quiescent_run_after_mutations_during_paging_equals_the_upstream(
    fresh_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    faults = fresh_upstream.state.faults
    faults.mutate_every = 40  # the data changes under the sync every 40 requests
    faults.mutation = {"assets_updated": 10, "assets_added": 3, "leads_added": 2}
    sync(tmp_path, fresh_upstream, object_store)
    assert fresh_upstream.state.mutations > 0
    faults.mutate_every = 0
    sync(tmp_path, fresh_upstream, object_store)  # incremental: no listing from scratch
    with api_over(tmp_path) as api:
        requests = mirror_requests(fresh_upstream)
        compare_all(fresh_upstream, api, requests, both_keys(fresh_upstream, api))


def test_a_digital_asset_walk_cut_short_resumes_at_its_next_page(
    fresh_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    from assets.streams import asset_named
    from ductwork.warehouse.sync_state import PAGE_WALK

    warehouse_digital_assets = asset_named("warehouse_digital_assets")
    walk_key = "warehouse_digital_assets" + PAGE_WALK
    from sandbox.server import Faults

    resources = resources_for(tmp_path, fresh_upstream.url, object_store)
    state = fresh_upstream.state
    pages = -(-len(state.assets) // 1000)
    assert pages >= 10
    state.faults = Faults(revoke_after=state.requests_seen + 8)  # the key dies mid-walk
    cut = dg.materialize([warehouse_digital_assets], resources=resources, raise_on_error=False)
    assert not cut.success
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        saved = con.execute("SELECT value FROM sync_state WHERE key = ?", [walk_key]).fetchall()
        stored_before = con.execute("SELECT count(*) FROM digital_assets").fetchall()[0][0]
    done = loads(saved[0][0])["pagesDone"]
    assert 1 <= done < pages
    assert stored_before == done * 1000  # every committed page, nothing beyond

    state.faults = Faults()
    again = dg.materialize([warehouse_digital_assets], resources=resources)
    metadata = metadata_by_asset(again)["warehouse_digital_assets"]
    assert metadata["resumed_after_page"] == done
    assert metadata["walk"] == "pages"
    assert metadata["requests"] == pages - done  # only the pages not yet committed
    upstream_assets = {a["assetId"]: a for a in all_assets(fresh_upstream)}
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        stored = dict(con.execute("SELECT asset_id, record FROM digital_assets").fetchall())
        leftover = con.execute(
            "SELECT count(*) FROM sync_state WHERE key = ?", [walk_key]
        ).fetchall()[0][0]
    assert {key: loads(value) for key, value in stored.items()} == upstream_assets
    assert leftover == 0


def test_a_sync_into_a_data_folder_that_does_not_exist_yet_creates_it(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    from assets.streams import asset_named

    catalog = asset_named("catalog_items")

    home = tmp_path / "not" / "there" / "yet"
    result = dg.materialize(
        [catalog],
        selection=["catalog_items"],
        resources=resources_for(home, upstream.url, object_store),
    )
    assert result.success
    materialized = [e.asset_key for e in result.get_asset_materialization_events()]
    assert materialized == [dg.AssetKey("catalog_items")]  # the subset, not all eight lists
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM catalog_items").fetchall()[0][0] > 0
        assert con.execute("SELECT count(*) FROM units").fetchall()[0][0] == 0
