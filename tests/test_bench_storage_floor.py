"""The storage floor's parts: what its store writes, and the floor it reports (unit tests: the
recording is written here rather than by the raw floor against a replay, as
``bench.storage_floor`` does; the store is real DuckDB on a file)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson
import pytest

from bench.storage_floor import COMPRESSIONS, Bodies, median_floor, store_once
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
    cpu_s, stored = store_once(bodies, database, compression)

    assert stored == 4 and cpu_s >= 0
    with duckdb.connect(str(database), read_only=True) as con:
        rows = con.execute("SELECT record FROM records").fetchall()
    records = [orjson.loads(row[0]) for row in rows]
    expected = [*PAGE, DETAIL, ENCODED]
    key = orjson.dumps
    assert sorted(records, key=key) == sorted(expected, key=key)


def test_store_once_starts_a_new_database_each_time(tmp_path: Path) -> None:
    bodies = Bodies.of_recording(_recording(tmp_path / "answers.recording"))
    database = tmp_path / "records.duckdb"
    store_once(bodies, database, None)
    _, stored = store_once(bodies, database, "zstd")
    assert stored == 4


def test_the_floor_is_fetch_and_start_up_and_the_cheapest_store_of_the_medians() -> None:
    floor = median_floor(
        fetch=[5.0, 6.0, 5.5],
        startup=[1.0, 0.8, 0.9],
        store={"DuckDB's choice": [5.0, 4.0, 4.5], "none": [3.0, 3.2, 2.9], "zstd": [4.0]},
    )
    assert floor.cheapest_store == ("none", 3.0)
    assert floor.floor_s == pytest.approx(5.5 + 0.9 + 3.0)
    assert floor.budget_s == pytest.approx(2.5 * 5.5)
    # What the target leaves for the rest of a sync: 13.75 - 9.4.
    assert floor.left_s == pytest.approx(4.35)
    report = floor.report()
    assert report["floor / fetch"] == pytest.approx(1.71)
    assert report["cheapest_store"] == "none"
