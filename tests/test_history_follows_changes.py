"""A publish that follows the change compares, for a stream whose SQL declares ``changed_keys``,
only the records of the keys whose rows changed or went. What it logs in the changes feed and
records as the feed's state must be exactly what comparing every record gives.

Unit tests of the history's core on real DuckDB files: rows are written into a warehouse
directly, and the history of the second publish is recorded with ``recording.record_publish``
(as a publish does) twice from the same start, once following the change and once comparing
every record, on two copies of the warehouse. Real syncs that publish this way are tested in
``tests/test_mirror_memory.py``.
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from ductwork import snapshots
from ductwork.history import recording, row_versions
from ductwork.streams.registry import DIGITAL_ASSETS, LEADS, STREAMS
from ductwork.warehouse.schema import schema_sql
from warehouse_sql import stream_section

FIRST = 40


def put_lead(con: duckdb.DuckDBPyConnection, lead_id: str, record: str | None) -> None:
    """A lead's details: ``record`` None is a lead the upstream answered 404 for."""
    con.execute("DELETE FROM lead_details WHERE id = ?", [lead_id])
    con.execute(
        "INSERT INTO lead_details (id, found, record, synced_at) VALUES (?, ?, ?, now())",
        [lead_id, record is not None, record],
    )


def put_asset(con: duckdb.DuckDBPyConnection, asset_id: str, record: str) -> None:
    con.execute("DELETE FROM digital_assets WHERE asset_id = ?", [asset_id])
    con.execute(
        "INSERT INTO digital_assets (asset_id, record, synced_at) VALUES (?, ?, now())",
        [asset_id, record],
    )


def lead(n: int, version: int = 1) -> str:
    return f'{{"id":"L{n}","v":{version}}}'


def asset(n: int, version: int = 1) -> str:
    return f'{{"assetId":"A{n}","v":{version}}}'


def published_then_changed(folder: Path) -> Path:
    """A warehouse published once with ``FIRST`` leads and assets, then changed in every way a
    key's record can change, or seem to; the current snapshot's file."""
    con = duckdb.connect(str(folder / "warehouse.duckdb"))
    con.execute(schema_sql())
    for n in range(FIRST):
        put_lead(con, f"L{n}", lead(n))
        put_asset(con, f"A{n}", asset(n))
    live = snapshots.publish(con, folder / "snapshots").snapshot.path
    put_lead(con, "L1", lead(1, 2))  # changed
    put_lead(con, "L2", None)  # now a 404: gone from the feed
    con.execute("DELETE FROM lead_details WHERE id = 'L3'")  # gone
    put_lead(con, "L100", lead(100))  # new
    put_lead(con, "L4", lead(4))  # written again as it was
    put_lead(con, "L5", lead(5, 2))
    put_lead(con, "L5", lead(5))  # changed, then back
    put_asset(con, "A1", asset(1, 2))
    con.execute("UPDATE digital_assets SET deleted_at = now() WHERE asset_id = 'A2'")
    con.execute("DELETE FROM digital_assets WHERE asset_id = 'A3'")
    put_asset(con, "A100", asset(100))
    put_asset(con, "A4", asset(4))
    con.close()
    return live


def recorded(warehouse: Path, live: Path, follow: bool) -> tuple[list[tuple], list[tuple], int]:
    """The second publish's history recorded on ``warehouse``: its feed log, the feed's state,
    and how many keys the last stream that followed the change compared (-1: none did)."""
    with duckdb.connect(str(warehouse)) as con:
        hashed = row_versions.hash_current_rows(con)
        seq = recording.record_publish(
            con,
            live,
            snapshots.new_version(),
            datetime.now(UTC),
            timedelta(days=90),
            hashed=hashed,
            follow_changes=follow,
        ).seq
        log = con.execute(
            "SELECT stream, key, deleted FROM history.feed_log WHERE seq = ? ORDER BY ALL", [seq]
        ).fetchall()
        state = con.execute("SELECT * FROM history.feed_state ORDER BY ALL").fetchall()
        try:
            compared = con.execute("SELECT count(*) FROM feed_keys").fetchall()[0][0]
        except duckdb.CatalogException:
            compared = -1
    return log, state, compared


def test_the_streams_that_follow_the_change_are_the_ones_this_module_changes() -> None:
    # A stream that newly declares ``changed_keys`` must have its records changed in every way
    # in ``published_then_changed`` too, or nothing here checks its declaration.
    following = {stream.name for stream in STREAMS if stream_section(stream.sql, "changed_keys")}
    assert following == {LEADS.name, DIGITAL_ASSETS.name}


def test_only_a_stream_whose_records_are_rows_of_one_table_follows_that_table_s_changes() -> None:
    # The rule for ``changed_keys`` (docs/memory.md): a key it leaves out whose record did change
    # would be missing from the feed, so it is declared only where every record is one row of
    # one table, and it takes its keys from that table's changes.
    for stream in STREAMS:
        changed = stream_section(stream.sql, "changed_keys")
        if not changed:
            continue
        tables = recording.feed_tables(stream.sql)
        assert len(tables) == 1, f"{stream.name}: its records are read from {sorted(tables)}"
        read = set(re.findall(rf"\b(\w+){row_versions.CHANGED_SUFFIX}\b", changed))
        assert read == tables, f"{stream.name}: changed_keys reads the changes of {sorted(read)}"


@pytest.mark.parametrize("quicker", [True, False], ids=["feed_records_now", "as_of macro"])
def test_following_the_change_logs_and_records_what_comparing_every_record_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quicker: bool
) -> None:
    # The records of the changed keys are read by the stream's feed_records_now, or, for a
    # stream without one, from its as_of macro.
    if not quicker:
        declared = recording.stream_section
        monkeypatch.setattr(
            recording,
            "stream_section",
            lambda sql, name: "" if name == "feed_records_now" else declared(sql, name),
        )
    live = published_then_changed(tmp_path)
    copies = {}
    for follow in (True, False):
        copy = tmp_path / f"follow-{follow}.duckdb"
        shutil.copyfile(tmp_path / "warehouse.duckdb", copy)
        copies[follow] = recorded(copy, live, follow)
    (log, state, compared), (every_log, every_state, every_compared) = copies[True], copies[False]
    assert log == every_log
    assert state == every_state
    assert log == [
        ("digital-assets", "A1", False), ("digital-assets", "A100", False),
        ("digital-assets", "A2", True), ("digital-assets", "A3", True),
        ("leads", "L1", False), ("leads", "L100", False),
        ("leads", "L2", True), ("leads", "L3", True),
    ]  # fmt: skip
    # The shortcut was taken: only the four keys of a changed row were compared, not all 40.
    assert (compared, every_compared) == (4, -1)
