"""Settings errors, API keys and snapshot publishing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dagster_duckdb import DuckDBResource

import warehouse_sql
from assets.loading import open_warehouse
from ductwork import snapshots
from ductwork.settings import SettingsError, SyncSettings, UpstreamSettings, load
from serve.api_keys import KeyStore


def test_missing_required_setting_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DUCTWORK_UPSTREAM_URL", raising=False)
    monkeypatch.setenv("DUCTWORK_UPSTREAM_API_KEY", "k")
    with pytest.raises(SettingsError) as caught:
        load(UpstreamSettings)
    assert str(caught.value) == "DUCTWORK_UPSTREAM_URL is not set"


def test_keys_are_stored_only_as_hashes_and_revocation_takes_effect(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("analyst", ["catalog"])
    assert key not in (tmp_path / "keys.json").read_text()
    assert store.verify(key).name == "analyst"
    assert store.verify(key + "x") is None
    other_reader = KeyStore(tmp_path / "keys.json")
    assert store.revoke("analyst") == 1
    assert other_reader.verify(key) is None


def test_unknown_scope_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scope"):
        KeyStore(tmp_path / "keys.json").create("x", ["everything"])


def test_a_published_snapshot_stays_readable_after_the_next_publish(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    con.execute(warehouse_sql.schema_sql())
    con.execute("INSERT INTO pairings VALUES (1, 'Pairing', now(), '{}', now())")
    first = snapshots.publish(con, tmp_path / "snapshots")
    con.execute("INSERT INTO pairings VALUES (2, 'Pairing', now(), '{}', now())")
    second = snapshots.publish(con, tmp_path / "snapshots")
    assert snapshots.current(tmp_path / "snapshots") == second
    with duckdb.connect(str(first.path), read_only=True) as old:
        assert old.execute("SELECT count(*) FROM pairings").fetchall() == [(1,)]
    live, reader = snapshots.open_current(tmp_path / "snapshots")
    with reader:
        assert reader.execute("SELECT count(*) FROM pairings").fetchall() == [(2,)]
        assert reader.execute("SELECT version FROM snapshot_info").fetchall() == [(live.version,)]
    assert not list((tmp_path / "snapshots").glob(".staging-*"))


def test_the_warehouse_runs_under_the_memory_limit_setting_and_refuses_a_malformed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("DUCTWORK_WAREHOUSE_MEMORY_LIMIT", "300MB")
    with open_warehouse(warehouse) as con:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    assert limit.startswith(("286", "300"))  # DuckDB reports the limit in MiB
    monkeypatch.setenv("DUCTWORK_WAREHOUSE_MEMORY_LIMIT", "300MB'; DROP TABLE leads; --")
    with pytest.raises(SettingsError, match=r"^DUCTWORK_WAREHOUSE_MEMORY_LIMIT "):
        load(SyncSettings)
