"""Settings errors, API keys and snapshot publishing."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from assets.resources import open_warehouse
from ductwork import snapshots
from ductwork.keys import KeyFile
from ductwork.settings import SettingsError, SyncSettings, UpstreamSettings, load
from ductwork.snapshots import fingerprint, stamp
from ductwork.warehouse import schema as warehouse_schema
from serve.live_snapshot import LiveSnapshot


def test_missing_required_setting_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DUCTWORK_UPSTREAM_URL", raising=False)
    monkeypatch.setenv("DUCTWORK_UPSTREAM_API_KEY", "k")
    with pytest.raises(SettingsError) as caught:
        load(UpstreamSettings)
    assert str(caught.value) == "DUCTWORK_UPSTREAM_URL is not set"


def test_keys_are_stored_only_as_hashes_and_revocation_takes_effect(tmp_path: Path) -> None:
    store = KeyFile(tmp_path / "keys.json")
    key = store.create("analyst", ["catalog"])
    assert key not in (tmp_path / "keys.json").read_text()
    assert store.verify(key).name == "analyst"
    assert store.verify(key + "x") is None
    other_reader = KeyFile(tmp_path / "keys.json")
    assert store.revoke("analyst") == 1
    assert other_reader.verify(key) is None


def test_unknown_scope_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scope"):
        KeyFile(tmp_path / "keys.json").create("x", ["everything"])


def warehouse_with_a_pairing(path: Path, record: str = "{}") -> duckdb.DuckDBPyConnection:
    """A warehouse file at ``path`` with the schema and one pairing holding ``record``."""
    con = duckdb.connect(str(path))
    con.execute(warehouse_schema.schema_sql())
    con.execute("INSERT INTO pairings VALUES (1, 'Pairing', now(), ?, now())", [record])
    return con


def test_a_published_snapshot_stays_readable_after_the_next_publish(tmp_path: Path) -> None:
    con = warehouse_with_a_pairing(tmp_path / "warehouse.duckdb")
    first = snapshots.publish(con, tmp_path / "snapshots").snapshot
    con.execute("INSERT INTO pairings VALUES (2, 'Pairing', now(), '{}', now())")
    second = snapshots.publish(con, tmp_path / "snapshots").snapshot
    assert snapshots.current(tmp_path / "snapshots") == second
    with duckdb.connect(str(first.path), read_only=True) as old:
        assert old.execute("SELECT count(*) FROM pairings").fetchall() == [(1,)]
    live, reader = snapshots.open_current(tmp_path / "snapshots")
    with reader:
        assert reader.execute("SELECT count(*) FROM pairings").fetchall() == [(2,)]
        assert reader.execute("SELECT version FROM snapshot_info").fetchall() == [(live.version,)]
    assert not list((tmp_path / "snapshots").glob(".staging-*"))


def test_a_watching_worker_notes_a_confirmation_without_a_request_or_a_new_snapshot(
    tmp_path: Path,
) -> None:
    """In-process (a unit test of the watcher thread): a publish that changed nothing moves no
    pointer, yet the age the worker reports falls back, as ``/readyz`` shows it."""
    folder = tmp_path / "snapshots"
    con = warehouse_with_a_pairing(tmp_path / "warehouse.duckdb", '{"a":1}')
    first = snapshots.publish(con, folder)
    an_hour_ago = time.time() - 3600
    for path in (folder / snapshots.POINTER, first.snapshot.path):
        os.utime(path, (an_hour_ago, an_hour_ago))
    live = LiveSnapshot(folder, check_interval_s=0.02)
    state = live.load_now()
    assert state is not None and live.age_seconds(state) > 3000
    live.watch()
    try:
        assert not snapshots.publish(con, folder).copied  # a confirmation only
        deadline = time.monotonic() + 10
        while live.age_seconds(state) > 60:
            assert time.monotonic() < deadline, "the watcher never noted the confirmation"
            time.sleep(0.02)  # polls; times nothing
        assert live.get() is state
    finally:
        live.close()


def test_a_publish_without_a_content_change_copies_nothing_and_confirms_the_snapshot(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "snapshots"
    con = warehouse_with_a_pairing(tmp_path / "warehouse.duckdb", '{"a":1}')
    first = snapshots.publish(con, folder)
    assert first.copied
    an_hour_ago = time.time() - 3600
    for path in (folder / snapshots.POINTER, first.snapshot.path):
        os.utime(path, (an_hour_ago, an_hour_ago))
    live = LiveSnapshot(folder)
    state = live.load_now()
    assert state is not None and live.age_seconds(state) > 3000

    # A run that rewrote the same rows (only their sync time moved) changes nothing.
    con.execute("UPDATE pairings SET synced_at = now() + INTERVAL 1 MINUTE")
    again = snapshots.publish(con, folder)
    assert not again.copied and again.snapshot == first.snapshot
    assert sorted(p.name for p in folder.glob("snapshot-*.duckdb")) == [first.snapshot.path.name]
    assert live.load_now() is state and live.age_seconds(state) < 60

    # Any change of content (here one member of one record) is a new snapshot.
    con.execute("UPDATE pairings SET record = '{\"a\":2}'")
    changed = snapshots.publish(con, folder)
    assert changed.copied and snapshots.current(folder) == changed.snapshot
    with duckdb.connect(str(changed.snapshot.path), read_only=True) as reader:
        recorded = reader.execute("SELECT content_fingerprint FROM snapshot_info").fetchall()
    assert recorded == [(changed.fingerprint,)] and changed.fingerprint != first.fingerprint
    state.lease.release()


def test_a_warehouse_untouched_since_its_publish_is_confirmed_without_a_fingerprint(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "snapshots"
    con = warehouse_with_a_pairing(tmp_path / "warehouse.duckdb")
    first = snapshots.publish(con, folder)
    again = snapshots.publish(con, folder)
    assert first.copied and first.fingerprinted
    assert not again.copied and not again.fingerprinted
    assert (again.snapshot, again.fingerprint) == (first.snapshot, first.fingerprint)

    # A stamp that is unreadable, or names another snapshot, vouches for nothing.
    (folder / stamp.STAMP).write_text("{not json", encoding="utf-8")
    assert snapshots.publish(con, folder).fingerprinted
    assert not snapshots.publish(con, folder).fingerprinted
    # Whole-second file times (a coarse file system) cannot tell a write in the same second.
    whole_second = (int(time.time()) - 60) * 1_000_000_000
    os.utime(tmp_path / "warehouse.duckdb", ns=(whole_second, whole_second))
    assert snapshots.publish(con, folder).fingerprinted  # the file changed: stamped anew
    assert snapshots.publish(con, folder).fingerprinted  # that stamp is whole seconds

    other = folder / f"{snapshots.PREFIX}20000101T000000000000Z-other{snapshots.SUFFIX}"
    shutil.copyfile(first.snapshot.path, other)
    (folder / snapshots.POINTER).write_text(other.name, encoding="utf-8")
    confirmed = snapshots.publish(con, folder)
    assert confirmed.fingerprinted and confirmed.snapshot.path == other
    con.close()


def test_any_write_after_a_publish_has_the_next_one_fingerprint_the_warehouse(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "snapshots"
    path = tmp_path / "warehouse.duckdb"
    con = warehouse_with_a_pairing(path)
    first = snapshots.publish(con, folder)

    # A write that leaves the content as it was (the log holds it): fingerprinted, not copied,
    # and the file stamped anew, so the run after it is confirmed unread again.
    con.execute("UPDATE pairings SET synced_at = now() + INTERVAL 1 MINUTE")
    neutral = snapshots.publish(con, folder)
    assert neutral.fingerprinted and not neutral.copied and neutral.snapshot == first.snapshot
    assert not snapshots.publish(con, folder).fingerprinted

    # A change made by another connection and checkpointed into the file on close.
    con.close()
    with duckdb.connect(str(path)) as other:
        other.execute("INSERT INTO pairings VALUES (2, 'Pairing', now(), '{}', now())")
    assert not stamp.write_ahead_log(path).exists()
    con = duckdb.connect(str(path))
    changed = snapshots.publish(con, folder)
    assert changed.fingerprinted and changed.copied and changed.snapshot != first.snapshot
    with duckdb.connect(str(changed.snapshot.path), read_only=True) as reader:
        assert reader.execute("SELECT count(*) FROM pairings").fetchall() == [(2,)]
    con.close()


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


def _publishes_anew_after(folder: Path, release: Callable[[], None]) -> bool:
    """Whether, with the data unchanged, a publish after ``release`` (which changes what the
    code publishes) copies a new snapshot, where one before it copied nothing."""
    con = duckdb.connect(str(folder / "warehouse.duckdb"))
    con.execute(warehouse_schema.schema_sql())
    first = snapshots.publish(con, folder / "snapshots")
    assert not snapshots.publish(con, folder / "snapshots").copied
    release()
    again = snapshots.publish(con, folder / "snapshots")
    return again.copied and again.snapshot != first.snapshot


def test_a_new_release_of_the_publishing_sql_publishes_anew_with_unchanged_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = warehouse_schema.snapshot_sql() + "\n-- a changed comment or view\n"
    assert _publishes_anew_after(
        tmp_path, lambda: monkeypatch.setattr(fingerprint, "snapshot_sql", lambda: released)
    )


def test_a_new_release_of_a_streams_feed_sql_publishes_anew_with_unchanged_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The feed's macros travel in the snapshot: a snapshot kept with the old ones would go on
    # serving records as the old release rendered them.
    feed_sql = fingerprint.as_of_macro

    def release() -> None:
        monkeypatch.setattr(
            fingerprint, "as_of_macro", lambda name: feed_sql(name) + "\n-- changed"
        )

    assert _publishes_anew_after(tmp_path, release)
