"""The storage floor's parts: what its stores write, and the floors it reports (unit tests: the
recording is written here rather than by the raw floor against a replay, as
``bench.storage_floor`` does; the store is real DuckDB on a file)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson
import pytest

from bench.storage_floor import COMPRESSIONS, STORES, Bodies, Runs, parts_of, store
from sandbox.recorded_answers import RecordingWriter

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json"
PAGE = [{"Id": "L1", "Name": "Ana \u00c5"}, {"Id": "L2", "Name": "Bo", "Rooms__c": 3.5}]
DETAIL = {"id": "L1", "address": {"city": "Oslo"}, "doNotSell": False}
# A list whose records are a string inside the envelope: kept whole, as one record.
ENCODED = {"success": True, "message": "OK", "data": '[{"contractorId":"C-1"}]'}


def _recording(path: Path) -> Path:
    with RecordingWriter(path) as writer:
        page = {"success": True, "data": PAGE, "pagination": {"totalPages": 1}}
        writer.add("/crm/v1.1/leads?cursorId=", OK, orjson.dumps(page))
        writer.add("/crm/v1.1/leads/L1", OK, orjson.dumps(DETAIL))
        writer.add("/internal/v1.0/accounts/contractors", OK, orjson.dumps(ENCODED))
    return path


@pytest.mark.parametrize("compression", list(COMPRESSIONS.values()))
def test_store_once_writes_each_record_of_a_page_and_each_other_body_once(
    tmp_path: Path, compression: str | None
) -> None:
    bodies = Bodies.of_recording(_recording(tmp_path / "answers.recording"))
    assert (len(bodies.pages), len(bodies.records)) == (1, 2)

    database = tmp_path / "records.duckdb"
    cpu_s, stored = store(bodies, database, "once", compression)

    assert stored == 4 and cpu_s >= 0
    with duckdb.connect(str(database), read_only=True) as con:
        rows = con.execute("SELECT record FROM records").fetchall()
    records = [orjson.loads(row[0]) for row in rows]
    expected = [*PAGE, DETAIL, ENCODED]
    key = orjson.dumps
    assert sorted(records, key=key) == sorted(expected, key=key)


def test_each_store_starts_a_new_database_each_time(tmp_path: Path) -> None:
    bodies = Bodies.of_recording(_recording(tmp_path / "answers.recording"))
    database = tmp_path / "records.duckdb"
    for kind in STORES:
        store(bodies, database, kind, None)
        _, stored = store(bodies, database, kind, "zstd")
        assert stored == 4


@pytest.mark.parametrize(
    ("kind", "keys"),
    [
        # L1's list record and its details are apart: the whole body's key is marked.
        ("keyed by id", ["L1", "L1#whole", "L2", "true#whole"]),
        ("keyed by position", [1, 2, 3, 4]),
    ],
)
def test_a_keyed_store_keeps_a_record_per_key_and_a_version_of_each_record(
    tmp_path: Path, kind: str, keys: list[object]
) -> None:
    bodies = Bodies.of_recording(_recording(tmp_path / "answers.recording"))
    database = tmp_path / "records.duckdb"

    cpu_s, stored = store(bodies, database, kind, None)

    assert stored == 4 and cpu_s >= 0
    with duckdb.connect(str(database), read_only=True) as con:
        stored_keys = sorted(row[0] for row in con.execute("SELECT key FROM records").fetchall())
        versions = con.execute(
            "SELECT count(*), count(DISTINCT record_hash), bool_and(is_current) FROM versions"
        ).fetchone()
        records = con.execute("SELECT record FROM records").fetchall()
    assert stored_keys == keys
    assert versions == (4, 4, True)
    key = orjson.dumps
    expected = sorted([*PAGE, DETAIL, ENCODED], key=key)
    assert sorted((orjson.loads(row[0]) for row in records), key=key) == expected


def test_keyed_by_id_stores_a_key_seen_twice_once(tmp_path: Path) -> None:
    twice = Bodies(pages=[orjson.dumps({"data": [*PAGE, PAGE[0]]})], records=[])
    _, stored = store(twice, tmp_path / "records.duckdb", "keyed by id", "uncompressed")
    assert stored == 2


def test_the_floors_are_their_parts_medians_summed_with_each_stores_cheapest_way() -> None:
    runs = Runs(fetch=[5.0, 6.0, 5.5], startup=[1.0, 0.8, 0.9], dagster_run=[1.6, 1.4, 1.5])
    runs.store["once"] = {"DuckDB's choice": [5.0, 4.0, 4.5], "none": [3.0, 3.2, 2.9]}
    runs.store["keyed by id"] = {"DuckDB's choice": [6.0, 6.5, 5.5], "none": [6.5, 7.0, 6.0]}
    runs.store["keyed by position"] = {"none": [4.0, 4.5, 5.0]}
    floor = runs.floor()

    assert floor.cheapest("once") == ("none", 3.0)
    assert floor.cheapest("keyed by id") == ("DuckDB's choice", 6.0)
    assert floor.floor_s == pytest.approx(5.5 + 0.9 + 3.0)
    assert floor.mirror_floor_s("keyed by id") == pytest.approx(5.5 + 1.5 + 6.0)
    assert floor.mirror_floor_s("keyed by position") == pytest.approx(5.5 + 1.5 + 4.5)
    assert floor.budget_s == pytest.approx(2.5 * 5.5)
    floors = floor.report()["floors"]
    # What the target leaves: 13.75 - 9.4, 13.75 - 13.0 and 13.75 - 11.5.
    assert floors["store once"] == {"cpu_s": 9.4, "x_fetch": 1.71, "target_leaves_s": 4.35}
    assert floors["mirror, keyed by id"]["target_leaves_s"] == pytest.approx(0.75)
    assert floors["mirror, keyed by position"]["x_fetch"] == pytest.approx(2.09)


def test_a_floor_above_the_target_leaves_a_negative_remainder_and_names_its_parts() -> None:
    runs = Runs(fetch=[4.0], startup=[1.0], dagster_run=[2.0])
    runs.store = {
        "once": {"none": [3.0]},
        "keyed by id": {"none": [8.5], "zstd": [9.0]},
        "keyed by position": {"none": [4.0]},
    }
    floor = runs.floor()

    # 4.0 + 2.0 + 8.5 against 2.5 × 4.0.
    figures = floor.report()["floors"]["mirror, keyed by id"]
    assert figures["target_leaves_s"] == pytest.approx(10.0 - 14.5)
    assert parts_of(floor, "mirror, keyed by id") == (
        "fetch 4.00 s + a Dagster run like the sync's 2.00 s + store keyed by id (none) 8.50 s"
    )
    assert parts_of(floor, "store once") == (
        "fetch 4.00 s + start-up 1.00 s + store once (none) 3.00 s"
    )
