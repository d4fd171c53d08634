"""The land-and-model floor (``bench.land_floor``) does what a sync built as *land, then
model* must do at the least: it lands the answer to every request a full sync makes and models
the three largest streams into the rows the sync's own row functions make.

A unit test of the benchmark's own code, run in the test's process (``land_run``) rather than
as the suite starts it, against a sandbox at scale small."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest

from bench.land_floor import land_run
from ductwork.contract import paths
from ductwork.streams.crm import detail_row, lead_row
from ductwork.streams.data_warehouse import digital_asset_row
from sandbox.server import SandboxHandle
from tests.conftest import SEED, UPSTREAM_KEY, ObjectStoreServer


@pytest.fixture(scope="module")
def sandbox(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    with object_store.sandbox(SEED, "small") as handle:
        yield handle


def _row(con: duckdb.DuckDBPyConnection, table: str, key: str, value: str) -> dict:
    """The modelled row of ``table`` whose ``key`` is ``value``, by column name."""
    cursor = con.execute(
        f"SELECT * EXCLUDE (record, synced_at) FROM {table} WHERE {key} = ?", [value]
    )
    (row,) = cursor.fetchall()
    return dict(zip([column for column, *_ in cursor.description], row, strict=True))


def _same(ours: object, theirs: object) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return math.isclose(ours, theirs)
    return ours == theirs


def test_the_land_floor_lands_every_answer_and_models_the_rows_the_sync_makes(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    db = tmp_path / "land.duckdb"
    before = sandbox.state.stats()
    run = asyncio.run(land_run(sandbox.url, UPSTREAM_KEY, db))
    stats = sandbox.state.stats()

    assert run.requests == stats["requests"] - before["requests"] == run.landed
    assert run.modelled == {
        "lead_details": stats["leads"], "digital_assets": stats["assets"], "leads": stats["leads"]
    }  # fmt: skip
    with duckdb.connect(str(db), read_only=True) as con:
        _check_rows(con)


def _check_rows(con: duckdb.DuckDBPyConnection) -> None:
    """Rows of each modelled table, against the sync's own row function of their records."""
    details = con.execute(f"""
        SELECT regexp_extract(target, '/([^/?]+)$', 1), body FROM landed
        WHERE starts_with(target, '{paths.LEADS}/') ORDER BY 1 LIMIT 50
    """).fetchall()  # fmt: skip
    assert details
    for lead_id, body in details:
        expected = detail_row(lead_id, orjson.loads(body))
        modelled = _row(con, "lead_details", "id", lead_id)
        assert all(_same(modelled[k], v) for k, v in expected.items()), (modelled, expected)
    for table, key, row_of in (
        ("leads", "id", lead_row),
        ("digital_assets", "asset_id", digital_asset_row),
    ):
        records = con.execute(f"SELECT {key}, record FROM {table} ORDER BY 1 LIMIT 50").fetchall()
        for record_key, record in records:
            expected = row_of(orjson.loads(record))
            modelled = _row(con, table, key, record_key)
            assert all(_same(modelled[k], v) for k, v in expected.items()), (modelled, expected)
