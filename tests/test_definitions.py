"""The Dagster code location loads, validates and documents itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from assets.notifications import PUBLISH_ASSETS
from pipelines.definitions import defs

ROOT = Path(__file__).parent.parent


def test_dagster_definitions_validate_passes_on_the_workspace(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "DUCTWORK_HOME": str(tmp_path)}
    dagster = Path(sys.executable).parent / "dagster"
    done = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_asset_has_a_group_description_owner_and_kinds() -> None:
    graph = defs.resolve_asset_graph()
    keys = list(graph.get_all_asset_keys())
    assert len(keys) >= 15
    for key in keys:
        node = graph.get(key)
        assert node.group_name in {"catalog", "warehouse", "crm", "internal", "serving"}, key
        assert node.description, key
        assert node.owners, key
        assert node.kinds, key


def test_publish_waits_for_every_synced_stream_and_notifications_for_the_publish() -> None:
    graph = defs.resolve_asset_graph()
    publish = graph.get(dg.AssetKey("serving_snapshot"))
    synced = {
        key
        for key in graph.get_all_asset_keys()
        if key.path[0] not in {*PUBLISH_ASSETS, "product_images"}
    }
    assert set(publish.parent_keys) == synced
    notify = graph.get(dg.AssetKey("change_notifications"))
    assert set(notify.parent_keys) == {dg.AssetKey("serving_snapshot")}


def test_schedules_cover_catalog_streams_reconciliation_and_images() -> None:
    schedules = {s.name: s for s in defs.schedules}
    assert schedules["catalog_hourly"].cron_schedule == "7 * * * *"
    assert schedules["assets_and_leads_every_15_minutes"].cron_schedule == "*/15 * * * *"
    assert schedules["reconcile_nightly"].job_name == "reconcile_all"
    assert schedules["pim_image_sync_nightly"].job_name == "pim_image_sync"


def test_dagster_dg_checks_and_lists_the_project_definitions() -> None:
    """Dagster's own project CLI loads the code location from pyproject.toml's [tool.dg]."""
    venv = Path(sys.executable).parent.parent
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    dg_cli = str(Path(sys.executable).parent / "dg")
    root = Path(__file__).parent.parent
    checked = subprocess.run(
        [dg_cli, "check", "defs"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    listed = subprocess.run(
        [dg_cli, "list", "defs", "--json"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "serving_snapshot" in listed.stdout and "sync_all" in listed.stdout
