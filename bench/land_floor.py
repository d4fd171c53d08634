"""The land-and-model floor: the raw floor's fetches (``bench.fetch_floor``), every answer's
body landed in DuckDB as it arrives, then the three largest streams modelled in SQL.

This is the least a sync built as "land, then model" spends: the bytes the upstream sent go
into one staging table (a writer thread, ``BATCH`` bodies per insert, while the fetches go on),
and once the fetches end one set-based statement per stream turns the landed bodies into the
typed columns of its table and each record's text (the lead details, the digital assets and
the lead list: together most of the bytes). Nothing else of a sync is done: no upsert against
stored rows, no history, no drift tally, no checks, no publish, no Dagster run, and the catalog
and submittals stay landed but unmodelled; each of those only adds to what this spends.

    uv run python -m bench.land_floor --url http://127.0.0.1:PORT --api-key KEY --db FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from bench.fetch_floor import _everything, _Fetcher, _headers
from bench.raw_http import RawPool
from ductwork.contract import paths
from ductwork.upstream.http_pool import request_target

# Bodies per insert into the staging table.
BATCH = 2_000
LAND_FLOOR_LABEL = "land-and-model floor: the raw client, bodies landed in DuckDB, then modelled"
# The land-and-model floor's own timings: (row label, its report's key).
LAND_FLOOR_PARTS = (
    ("fetch and land, s", "fetch_land_s"),
    ("model in SQL, s", "model_s"),
    ("fetch and land, CPU s", "fetch_land_cpu_s"),
    ("model in SQL, CPU s", "model_cpu_s"),
)

LANDED_DDL = "CREATE TABLE landed (target VARCHAR, body VARCHAR)"
# One statement per modelled stream: its typed columns, each record parsed once
# (``json_transform``), and each record's text.
MODELS = {
    "lead_details": f"""
        CREATE TABLE lead_details AS
        WITH parsed AS (
            SELECT target, body, json_transform(body, '{{
                "email": "VARCHAR", "name": "VARCHAR", "company": "VARCHAR",
                "phone": "VARCHAR", "category": "VARCHAR", "status": "VARCHAR",
                "purchaseStatus": "VARCHAR", "assignedContractor": "VARCHAR",
                "assignedBU": "VARCHAR", "annualRevenue": "DOUBLE", "doNotSell": "BOOLEAN"
            }}') AS d
            FROM landed WHERE starts_with(target, '{paths.LEADS}/')
        )
        SELECT regexp_extract(target, '/([^/?]+)$', 1) AS id, d.email, d.name, d.company,
            d.phone, d.category, d.status, d.purchaseStatus AS purchase_status,
            d.assignedContractor AS assigned_contractor, d.assignedBU AS assigned_bu,
            d.annualRevenue AS annual_revenue, d.doNotSell AS do_not_sell, true AS found,
            body AS record, now() AS synced_at
        FROM parsed
    """,
    "digital_assets": f"""
        CREATE TABLE digital_assets AS
        WITH records AS (
            SELECT unnest(from_json(body -> 'data', '["json"]')) AS r
            FROM landed WHERE starts_with(target, '{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}')
        ), parsed AS (
            SELECT r, json_transform(r, '{{
                "assetId": "VARCHAR", "sku": "VARCHAR", "assetType": "VARCHAR",
                "title": "VARCHAR", "url": "VARCHAR", "mimeType": "VARCHAR",
                "language": "VARCHAR", "fileSizeBytes": "BIGINT", "createdAt": "VARCHAR",
                "updatedAt": "VARCHAR"
            }}') AS a FROM records
        )
        SELECT a.assetId AS asset_id, a.sku, a.assetType AS asset_type, a.title, a.url,
            a.mimeType AS mime_type, a.language, a.fileSizeBytes AS file_size_bytes,
            try_cast(a.createdAt AS TIMESTAMPTZ) AS created_at,
            try_cast(a.updatedAt AS TIMESTAMPTZ) AS updated_at, a.updatedAt AS updated_at_text,
            r::VARCHAR AS record, NULL::TIMESTAMPTZ AS deleted_at, now() AS synced_at
        FROM parsed
    """,
    "leads": f"""
        CREATE TABLE leads AS
        WITH records AS (
            SELECT unnest(from_json(body -> 'data', '["json"]')) AS r
            FROM landed
            WHERE target = '{paths.LEADS}' OR starts_with(target, '{paths.LEADS}?')
        ), parsed AS (
            SELECT r, json_transform(r, '{{
                "Id": "VARCHAR", "CreatedDate": "VARCHAR", "LeadID__c": "VARCHAR",
                "Status": "VARCHAR", "LeadSource": "VARCHAR", "Name": "VARCHAR",
                "Business_Unit__c": "VARCHAR", "StateCode": "VARCHAR",
                "PostalCode": "VARCHAR", "Campaign__c": "VARCHAR"
            }}') AS l FROM records
        )
        SELECT l.Id AS id, try_cast(l.CreatedDate AS TIMESTAMPTZ) AS created_at,
            l.CreatedDate AS created_date_text, l.LeadID__c AS lead_number, l.Status AS status,
            l.LeadSource AS lead_source, l.Name AS name, l.Business_Unit__c AS business_unit,
            l.StateCode AS state_code, l.PostalCode AS postal_code, l.Campaign__c AS campaign,
            r::VARCHAR AS record, now() AS synced_at
        FROM parsed
    """,
}


@dataclass
class LandRun:
    """What one run fetched, landed and modelled, and how long each part took."""

    seconds: float  # the fetches and the landing, then the modelling
    fetch_land_s: float
    model_s: float
    fetch_land_cpu_s: float
    model_cpu_s: float
    requests: int
    bytes: int
    landed: int
    modelled: dict[str, int]


class _Lander:
    """Bodies held until ``BATCH`` of them, then inserted by one writer thread while the
    fetches go on (DuckDB lets go of the interpreter while it inserts)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="land")
        self.held: list[tuple[str, bytes]] = []
        self.writes: list[asyncio.Future[None]] = []

    def add(self, target: str, body: bytes) -> None:
        self.held.append((target, body))
        if len(self.held) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if self.held:
            batch, self.held = self.held, []
            loop = asyncio.get_running_loop()
            self.writes.append(loop.run_in_executor(self.writer, self._insert, batch))

    def _insert(self, batch: list[tuple[str, bytes]]) -> None:
        incoming = pa.table(
            {
                "target": pa.array([target for target, _ in batch], pa.string()),
                "body": pa.array([body for _, body in batch], pa.binary()).cast(pa.string()),
            }
        )
        self.con.register("incoming", incoming)
        self.con.execute("INSERT INTO landed SELECT * FROM incoming")
        self.con.unregister("incoming")

    async def done(self) -> None:
        self.flush()
        await asyncio.gather(*self.writes)
        self.writer.shutdown()


def _cpu_s() -> float:
    """This process's CPU time so far, every thread's (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def land_run(url: str, api_key: str, db: Path, concurrency: int = 8) -> LandRun:
    """Fetch what a full sync fetches, landing every body in ``db``; then model."""
    con = duckdb.connect(str(db))
    con.execute(LANDED_DDL)
    lander = _Lander(con)
    started, cpu_at_start = time.perf_counter(), _cpu_s()
    async with RawPool(url, concurrency, _headers(api_key)) as pool:

        async def landing(path: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
            status, body = await pool.get(path, params)
            lander.add(request_target(path, params), body)
            return status, body

        fetch = _Fetcher(landing, concurrency)
        await _everything(fetch)
        await lander.done()
    landed_at, cpu_landed = time.perf_counter(), _cpu_s()
    modelled = {}
    for table, statement in MODELS.items():
        con.execute(statement)
        modelled[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    ended, cpu_ended = time.perf_counter(), _cpu_s()
    (landed,) = con.execute("SELECT count(*) FROM landed").fetchone()
    con.close()
    return LandRun(
        ended - started, landed_at - started, ended - landed_at, cpu_landed - cpu_at_start,
        cpu_ended - cpu_landed, fetch.requests, fetch.bytes, landed, modelled,
    )  # fmt: skip


def floor_summary(
    land_cpu: float, raw_cpu: float, wall_ratio: float, dagster_cpu: float | None, target: float
) -> str:
    """What the floor says of the sync's CPU target (``target`` times the raw floor's CPU): the
    floor's CPU and wall against the raw floor's, and, given a Dagster run's own CPU
    (``dagster_cpu``), the least CPU ratio a sync of this design can have."""
    line = (
        f"land-and-model floor / raw floor: CPU **{land_cpu / raw_cpu:.2f}**, wall "
        f"{wall_ratio:.2f} (its modelling runs after its fetches)."
    )
    if dagster_cpu is None:
        return line
    least = land_cpu + dagster_cpu
    return (
        f"{line} A sync is also a Dagster run: section 3's no-op run less its start-up floor "
        f"costs {dagster_cpu:.1f} s of CPU (imports left out, so this understates it). Land, "
        f"model and that run: {least:.1f} s, **{least / raw_cpu:.2f} ×** the raw floor's CPU "
        f"(the sync's target: ≤ {target:g}), before the upsert against stored rows, "
        "the history, the drift tally, the checks, the publish and the catalog's modelling, "
        "each of which only adds to it."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--db", type=Path, required=True, help="a DuckDB file, made anew")
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    options.db.unlink(missing_ok=True)
    run = asyncio.run(land_run(options.url, options.api_key, options.db, options.concurrency))
    options.db.unlink(missing_ok=True)
    print(json.dumps(run.__dict__))


if __name__ == "__main__":
    main()
