"""The checks that guard a publish: a table emptied since the last publish blocks it, and a
snapshot whose numbered rows moved is refused."""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from assets.check_steps import CheckInputs, evaluate
from assets.checks import keys_unique_and_present
from assets.resources import DataHome
from ductwork import snapshots
from ductwork.settings import HomeSettings
from ductwork.snapshots import publishing
from ductwork.streams.model import Table
from ductwork.streams.registry import LEADS, MANUALS
from tests.conftest import home_with_published_snapshot


def run_manuals_check(home: Path) -> dg.AssetCheckResult:
    """The manuals table's blocking check, run on ``home``."""
    step = MANUALS.steps[0]
    key, rule = keys_unique_and_present(dg.AssetKey(step.asset), step.table)
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


def test_a_key_duckdb_enforces_is_trusted_and_a_table_keyed_otherwise_fails_its_check(
    synced_home: Path, tmp_path: Path
) -> None:
    trusted = run_manuals_check(synced_home)
    assert trusted.passed
    assert trusted.metadata["keys_enforced_by"].value == "PRIMARY KEY (key)"
    with duckdb.connect(str(HomeSettings(home=synced_home).warehouse_path)) as con:
        (key,) = con.execute("SELECT key FROM manuals LIMIT 1").fetchone()
        with pytest.raises(duckdb.ConstraintException):  # what the check relies on
            con.execute("INSERT INTO manuals (key) VALUES (?)", [key])

    otherwise = run_key_check(tmp_path, "CREATE TABLE t (k VARCHAR PRIMARY KEY, j VARCHAR)",
                              "INSERT INTO t VALUES ('a', 'x'), ('b', 'x')", ("j",))  # fmt: skip
    assert not otherwise.passed
    assert otherwise.metadata["keys_enforced_by"].value.startswith("nothing")


def test_a_table_without_a_primary_key_has_its_null_and_repeated_keys_counted(
    tmp_path: Path,
) -> None:
    """The large tables carry no key index (DuckDB would hold it in memory): the check counts
    what a primary key would have refused, per key of one or more columns."""
    counted = run_key_check(tmp_path / "loose", "CREATE TABLE t (k VARCHAR, j INTEGER)",
                            "INSERT INTO t VALUES ('a', 1), ('a', 1), ('a', 2), (NULL, 1), "
                            "('b', NULL), ('c', 3), ('c', 3), ('c', 3)", ("k", "j"))  # fmt: skip
    assert not counted.passed
    assert counted.metadata["keys_enforced_by"].value == "this check (no primary key)"
    assert counted.metadata["null_keys"].value == 2
    assert counted.metadata["repeated_keys"].value == 3  # ('a', 1) once more, ('c', 3) twice
    assert counted.metadata["rows"].value == 8

    clean = run_key_check(tmp_path / "clean", "CREATE TABLE t (k VARCHAR NOT NULL)",
                          "INSERT INTO t VALUES ('a'), ('b')", ("k",))  # fmt: skip
    assert clean.passed
    assert clean.metadata["null_keys"].value == clean.metadata["repeated_keys"].value == 0


def test_keys_without_a_primary_key_are_counted_unless_nothing_was_written_since_a_publish(
    synced_home: Path, tmp_path: Path
) -> None:
    """The lead list's table has no primary key. Right after a publish the warehouse is
    untouched (its stamp says so): the keys the publish's checks counted still hold, and are
    not counted again. Once a lead is written twice, they are counted, and the check fails."""
    step = LEADS.steps[0]
    key, rule = keys_unique_and_present(dg.AssetKey(step.asset), step.table)
    settings = HomeSettings(home=tmp_path)
    shutil.copyfile(HomeSettings(home=synced_home).warehouse_path, settings.warehouse_path)
    resource = DuckDBResource(database=str(settings.warehouse_path))
    with resource.get_connection() as con:
        snapshots.publish(con, settings.snapshots_dir)

    def check() -> dg.AssetCheckResult:
        with ExitStack() as stack:
            inputs = CheckInputs.standalone(key, resource, DataHome(path=str(tmp_path)), stack)
            return evaluate(rule, inputs)

    as_published = check()
    with duckdb.connect(str(settings.warehouse_path)) as con:
        con.execute("INSERT INTO leads SELECT * FROM leads LIMIT 1")
    counted = check()

    assert as_published.passed
    assert as_published.metadata["keys_enforced_by"].value.startswith("the current snapshot's")
    assert "repeated_keys" not in as_published.metadata
    assert not counted.passed
    assert counted.metadata["keys_enforced_by"].value == "this check (no primary key)"
    assert counted.metadata["null_keys"].value == 0
    assert counted.metadata["repeated_keys"].value == 1
    assert counted.metadata["rows"].value == as_published.metadata["rows"].value + 1


def run_key_check(
    home: Path, create: str, insert: str, key: tuple[str, ...]
) -> dg.AssetCheckResult:
    """The key check of table ``t`` keyed by ``key``, in a warehouse of its own in ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    warehouse = home / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as con:
        con.execute(create)
        con.execute(insert)
    asset, rule = keys_unique_and_present(dg.AssetKey("t"), Table("t", key))
    with ExitStack() as stack:
        inputs = CheckInputs.standalone(
            asset, DuckDBResource(database=str(warehouse)), DataHome(path=str(home)), stack
        )
        return evaluate(rule, inputs)


def test_a_copy_whose_numbered_rows_change_before_its_checkpoint_is_refused(
    synced_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numbered lists point at base rows by rowid. Here ten leads of the copy are deleted
    after its lists were numbered, as a compaction of the copy would move them: the publish
    must refuse rather than serve wrong records, and a publish left alone then succeeds."""
    home = HomeSettings(home=tmp_path)
    shutil.copyfile(HomeSettings(home=synced_home).warehouse_path, home.warehouse_path)
    build = publishing.add_snapshot_extras

    def build_then_delete_leads(con: duckdb.DuckDBPyConnection, *args: str) -> None:
        build(con, *args)
        con.execute("DELETE FROM leads WHERE rowid < 10")

    monkeypatch.setattr(publishing, "add_snapshot_extras", build_then_delete_leads)
    refused = pytest.raises(RuntimeError, match="changed the rows its numbered lists point at")
    with duckdb.connect(str(home.warehouse_path)) as con, refused:
        snapshots.publish(con, home.snapshots_dir)
    assert snapshots.current(home.snapshots_dir) is None
    assert not [p for p in home.snapshots_dir.iterdir() if p.suffix == ".duckdb"]

    monkeypatch.setattr(publishing, "add_snapshot_extras", build)
    with duckdb.connect(str(home.warehouse_path)) as con:
        published = snapshots.publish(con, home.snapshots_dir)
    with duckdb.connect(str(published.snapshot.path), read_only=True) as con:
        misplaced = con.execute(
            "SELECT count(*) FROM serving_leads AS n JOIN leads AS b ON b.rowid = n.row_id "
            "WHERE b.id <> n.id"
        ).fetchall()[0][0]
        pointed = con.execute(
            "SELECT count(*) FROM serving_leads AS n JOIN leads AS b ON b.rowid = n.row_id"
        ).fetchall()[0][0]
        leads = con.execute("SELECT count(*) FROM leads").fetchall()[0][0]
    assert misplaced == 0 and pointed == leads
