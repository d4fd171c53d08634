"""Stream checks fail for the right reason, block the publish, and the sync controls work.

Every run goes through the ``ductwork`` command on an instance under a fresh DUCTWORK_HOME,
against a real sandbox upstream.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from assets.resources import DataHome
from pipelines.definitions import defs
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env


@contextmanager
def instance_of(home: Path) -> Iterator[dg.DagsterInstance]:
    """The Dagster instance that ``ductwork sync`` used for ``home``."""
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            yield instance
    finally:
        del os.environ["DAGSTER_HOME"]


def latest_evaluation(
    instance: dg.DagsterInstance, asset: str, check: str
) -> tuple[bool, dict[str, Any]]:
    """Whether the latest evaluation of ``asset``'s ``check`` passed, and its metadata."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check)
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    assert records and records[0].event is not None, f"{asset}:{check} never ran"
    evaluation = records[0].event.dagster_event.event_specific_data
    return evaluation.passed, {name: value.value for name, value in evaluation.metadata.items()}


def latest_metadata(instance: dg.DagsterInstance, asset: str) -> dict[str, Any]:
    """The metadata of the asset's latest materialization."""
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None and event.asset_materialization is not None
    return {name: value.value for name, value in event.asset_materialization.metadata.items()}


def publishes(home: Path) -> int:
    """How many times serving_snapshot was materialized in ``home``'s instance."""
    with instance_of(home) as instance:
        return len(
            instance.fetch_materializations(dg.AssetKey("serving_snapshot"), limit=100).records
        )


def test_a_shrunken_table_fails_its_check_blocks_the_publish_and_a_full_refresh_repairs_it(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
    first = ductwork("sync", "--select", "warehouse_digital_assets", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert publishes(tmp_path) == 1
    # Half the mirrored rows vanish from the warehouse; the bookmark says they are loaded.
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        (live,) = con.execute("SELECT count(*) FROM digital_assets").fetchone()
        con.execute("DELETE FROM digital_assets WHERE hash(asset_id) % 2 = 0")
        (left,) = con.execute("SELECT count(*) FROM digital_assets").fetchone()
    assert left < 0.8 * live

    blocked = ductwork("sync", "--select", "warehouse_digital_assets", env=env)
    assert blocked.returncode == 1
    with instance_of(tmp_path) as instance:
        passed, metadata = latest_evaluation(
            instance, "warehouse_digital_assets", "warehouse_digital_assets_no_large_shrink"
        )
    assert not passed
    assert (metadata["rows_before"], metadata["rows"]) == (live, left)
    assert metadata["reconciliation"] is False
    assert publishes(tmp_path) == 1, "a failed blocking check must stop the publish"

    repaired = ductwork("sync", "--full-refresh", "warehouse_digital_assets", env=env)
    assert repaired.returncode == 0, repaired.stderr[-3000:]
    with instance_of(tmp_path) as instance:
        after = latest_metadata(instance, "warehouse_digital_assets")
        complete, counts = latest_evaluation(
            instance,
            "warehouse_digital_assets",
            "warehouse_digital_assets_complete_against_upstream",
        )
    assert after["mode"] == "reconcile"
    assert after["dagster/row_count"] == live
    assert after["resume_point_epoch_s"] > 0  # the watermark, numeric so the UI can plot it
    assert complete and counts["reported_total"] == counts["rows"] == live
    assert publishes(tmp_path) == 2


@pytest.fixture()
def own_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, for a test that deletes upstream data."""
    with object_store.sandbox(11) as handle:
        yield handle


def test_a_reconciliation_may_shrink_a_table_to_the_upstream_total(
    own_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, own_upstream, object_store, UPSTREAM_KEY)
    first = ductwork("sync", "--select", "warehouse_digital_assets", "--no-publish", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    with instance_of(tmp_path) as instance:
        before = latest_metadata(instance, "warehouse_digital_assets")["dagster/row_count"]
    deleted = own_upstream.state.mutate({"assets_deleted": before * 2 // 5})["assets_deleted"]

    reconciled = ductwork("sync", "--full-refresh", "warehouse_digital_assets", env=env)
    assert reconciled.returncode == 0, reconciled.stderr[-3000:]
    with instance_of(tmp_path) as instance:
        passed, shrink = latest_evaluation(
            instance, "warehouse_digital_assets", "warehouse_digital_assets_no_large_shrink"
        )
        complete, counts = latest_evaluation(
            instance,
            "warehouse_digital_assets",
            "warehouse_digital_assets_complete_against_upstream",
        )
        metadata = latest_metadata(instance, "warehouse_digital_assets")
    assert passed and shrink["reconciliation"] is True
    assert shrink["rows_lost"] == len(deleted) > 0.2 * before
    assert metadata["rows_deleted"] == len(deleted)
    assert complete and counts["reported_total"] == before - len(deleted)


def test_a_lead_cursor_behind_the_previous_run_fails_and_a_reset_rereads_every_lead(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
    first = ductwork("sync", "--select", "crm_leads", "--no-publish", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    with instance_of(tmp_path) as instance:
        reached = latest_metadata(instance, "crm_leads")
        # As if an earlier run had reached a later lead than the warehouse now holds.
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "crm_leads",
                metadata={"cursor_created_date": "2999-01-01T00:00:00.000Z", "cursor_id": "z"},
            )
        )
    assert reached["cursor_created_date"] and reached["cursor_id"]

    behind = ductwork("sync", "--select", "crm_leads", env=env)
    assert behind.returncode == 1
    with instance_of(tmp_path) as instance:
        passed, metadata = latest_evaluation(
            instance, "crm_leads", "crm_leads_cursor_only_moves_forward"
        )
    assert not passed
    assert metadata["cursor_before"] == "2999-01-01T00:00:00.000Z, z"
    assert metadata["cursor"] == f"{reached['cursor_created_date']}, {reached['cursor_id']}"
    assert publishes(tmp_path) == 0

    reset = ductwork("sync", "--reset-bookmark", "crm_leads", "--no-publish", env=env)
    assert reset.returncode == 0, reset.stderr[-3000:]
    with instance_of(tmp_path) as instance:
        after = latest_metadata(instance, "crm_leads")
        passed, _ = latest_evaluation(instance, "crm_leads", "crm_leads_cursor_only_moves_forward")
    # An incremental run after a reset walks the whole list again, and ends where it was.
    assert after["leads_new_or_resumed"] == after["dagster/row_count"] > 0
    assert after["cursor_created_date"] == reached["cursor_created_date"]
    assert after["cursor_epoch_s"] == reached["cursor_epoch_s"] > 0
    assert passed


def test_completeness_fails_when_rows_fall_short_of_the_upstream_total(tmp_path: Path) -> None:
    assets = dg.AssetKey("warehouse_digital_assets")
    key = dg.AssetCheckKey(assets, "warehouse_digital_assets_complete_against_upstream")
    check = next(c for c in defs.asset_checks if key in c.check_keys)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                assets, metadata={"dagster/row_count": 95, "reported_total": 100}
            )
        )
        result = dg.materialize(
            [check, dg.AssetSpec(assets)],
            instance=instance,
            selection=dg.AssetSelection.checks(key),
            # The multi-check asks for both; this check reads neither, only the instance.
            resources={
                "warehouse": DuckDBResource(database=str(tmp_path / "warehouse.duckdb")),
                "data_home": DataHome(path=str(tmp_path)),
            },
            raise_on_error=False,
        )
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert {k: v.value for k, v in evaluation.metadata.items()} == {
        "rows": 95,
        "reported_total": 100,
        "missing": 5,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reset-bookmark", "pairings"], "keeps no resume point"),
        (["--full-refresh", "no_such_stream"], "unknown stream 'no_such_stream'"),
    ],
)
def test_stream_controls_name_what_they_cannot_do(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = ductwork("sync", *args, env={**os.environ, "DUCTWORK_HOME": str(tmp_path)}, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_every_synced_stream_has_blocking_stream_checks_and_a_freshness_policy() -> None:
    from assets.streams import SYNCED_KEYS
    from pipelines.definitions import ALL_CHECKS

    graph = defs.resolve_asset_graph()
    blocking = {spec.key for check in ALL_CHECKS for spec in check.check_specs if spec.blocking}
    assert dg.AssetKey("indoor_units") in SYNCED_KEYS  # the catalog step's lists, one by one
    for key in SYNCED_KEYS:
        name = key.to_user_string()
        assert dg.AssetCheckKey(key, f"{name}_no_large_shrink") in blocking, name
        assert graph.get(key).freshness_policy is not None, name
    assert dg.AssetCheckKey(dg.AssetKey("crm_leads"), "crm_leads_cursor_only_moves_forward") in (
        blocking
    )


def test_every_upstream_reader_shares_one_pool_that_the_instance_limits_to_one(
    tmp_path: Path,
) -> None:
    from pipelines.instance import prepare_dagster_home

    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        # Notifications read the published snapshot, never the warehouse: no slot to wait for.
        expected = set() if key.path[0] == "change_notifications" else {"duckdb_warehouse"}
        assert graph.get(key).pools == expected, key
    prepare_dagster_home(tmp_path)
    try:
        with dg.DagsterInstance.get() as instance:
            assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
            assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 1
    finally:
        del os.environ["DAGSTER_HOME"]
