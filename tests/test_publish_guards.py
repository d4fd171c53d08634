"""The checks that guard a publish: a table emptied since the last publish blocks it."""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.checks import CheckInputs, evaluate, keys_unique_and_present
from assets.internal import internal_manuals
from ductwork.settings import HomeSettings
from pipelines.resources import DataHome
from tests.conftest import home_with_published_snapshot


def run_manuals_check(home: Path) -> dg.AssetCheckResult:
    """The manuals table's blocking check, run on ``home``."""
    key, rule = keys_unique_and_present(internal_manuals.key, "manuals", ["key"])
    settings = HomeSettings(home=home)
    with ExitStack() as stack:
        inputs = CheckInputs.standalone(
            key,
            DuckDBResource(database=str(settings.warehouse_path)),
            DataHome(path=str(home)),
            stack,
        )
        return evaluate(rule, inputs)


def test_a_table_emptied_since_the_last_publish_fails_its_blocking_check(
    synced_home: Path, tmp_path: Path
) -> None:
    home_with_published_snapshot(synced_home, tmp_path)

    result = run_manuals_check(tmp_path)

    assert not result.passed
    assert result.metadata["rows"].value == 0
    assert result.metadata["rows_in_published_snapshot"].value > 0


def test_a_full_table_passes_and_a_first_sync_is_never_blocked_by_emptiness(
    synced_home: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    first.mkdir()
    assert run_manuals_check(first).passed  # nothing published yet: empty is allowed
    full = tmp_path / "full"
    home_with_published_snapshot(synced_home, full)
    shutil.copyfile(
        HomeSettings(home=synced_home).warehouse_path, HomeSettings(home=full).warehouse_path
    )
    assert run_manuals_check(full).passed
