"""The checks that guard a publish: a table emptied since the last publish blocks it."""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import duckdb
import pytest
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


def test_a_key_duckdb_enforces_is_trusted_and_one_it_does_not_is_counted(
    synced_home: Path, tmp_path: Path
) -> None:
    trusted = run_manuals_check(synced_home)
    assert trusted.passed
    assert trusted.metadata["keys_enforced_by"].value == "PRIMARY KEY (key)"
    with duckdb.connect(str(HomeSettings(home=synced_home).warehouse_path)) as con:
        (key,) = con.execute("SELECT key FROM manuals LIMIT 1").fetchone()
        with pytest.raises(duckdb.ConstraintException):  # what the check relies on
            con.execute("INSERT INTO manuals (key) VALUES (?)", [key])

    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE loose (k VARCHAR)")  # no key constraint
        con.execute("INSERT INTO loose VALUES ('a'), ('a'), (NULL), ('b')")
    key, rule = keys_unique_and_present(dg.AssetKey("loose"), "loose", ["k"])
    with ExitStack() as stack:
        inputs = CheckInputs.standalone(
            key, DuckDBResource(database=str(warehouse)), DataHome(path=str(tmp_path)), stack
        )
        counted = evaluate(rule, inputs)
    assert not counted.passed
    assert counted.metadata["null_keys"].value == 1
    assert counted.metadata["duplicate_keys"].value == 2  # four rows, two distinct keys
