"""What storing a lead's details costs today, against landing the bodies and typing them in SQL.

The first measurement issue 45 asks for before the ingest path is reworked. Lead details are
half of a full sync (one request and one record per lead); today each body is parsed by orjson,
its drift tallied, its row built in Python (``detail_row``, ``dumps`` of the record, an Arrow
table from the rows) and the batch upserted from Arrow. The alternative lands each batch's bodies
as received (ids and bytes, one Arrow table of two columns) and lets DuckDB parse, type and
upsert them in one statement, with the drift judged once per distinct record structure.

Both run here on the same bodies (the sandbox's own, at ``--scale``), batch by batch, into
``lead_details`` as the warehouse's DDL creates it, each on a fresh in-memory database: the
history and the detail queue's statements, the same in both designs, are left out. Reported:
CPU seconds of each (``time.process_time``, this process's threads included; best of
``--repeats``), their ratio, and whether the landed design stored the same rows (the typed
columns exactly; the record as JSON values). Then what the write alone costs, per record: the
landed bodies inserted as records, untyped, into the table as the DDL creates it (no primary
key) and into the same table with a primary key on ``id`` (what that key cost, and why the
table has none).

    uv run --frozen python -m bench.ingest_probe --scale medium
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from ductwork.contract.encoding import dumps, loads
from ductwork.streams.crm import DETAIL_COLUMNS, LEAD_DETAIL_RECORD, detail_row
from ductwork.upstream.schema_drift import DriftTally
from warehouse_sql import stream_section

BATCH = 1000
# (column, the detail's member, the JSON types it is taken from) of the typed columns.
TEXT_MEMBERS = (
    ("email", "email"), ("name", "name"), ("company", "company"), ("phone", "phone"),
    ("category", "category"), ("status", "status"), ("purchase_status", "purchaseStatus"),
    ("assigned_contractor", "assignedContractor"), ("assigned_bu", "assignedBU"),
)  # fmt: skip
Bodies = Sequence[tuple[str, bytes]]


def sandbox_bodies(scale: str) -> list[tuple[str, bytes]]:
    """Every lead's id and detail body as the sandbox answers them."""
    from sandbox.server import build

    _, state = build(7, scale, "probe-key", "http://127.0.0.1:1")
    bodies = []
    for _, lead_id in state.leads.keys:
        found = state.lead(lead_id)
        assert found is not None
        bodies.append((lead_id, dumps(found[1])))
    return bodies


def fresh_table() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(stream_section("leads", "tables"))
    return con


def today(con: duckdb.DuckDBPyConnection, bodies: Bodies) -> None:
    """The detail queue's store as it is: parse, tally, build rows, upsert from Arrow."""
    drift = DriftTally(LEAD_DETAIL_RECORD)
    for start in range(0, len(bodies), BATCH):
        found = [(lead_id, loads(body)) for lead_id, body in bodies[start : start + BATCH]]
        drift.count([detail for _, detail in found])
        now = datetime.now(UTC)
        table = DETAIL_COLUMNS.table(
            [
                {**detail_row(lead_id, detail), "record": dumps(detail).decode(), "synced_at": now}
                for lead_id, detail in found
            ]
        )
        con.register("incoming_rows", table)
        # As the sync upserts (``leads.sql``): the table has no key to replace on.
        con.execute("DELETE FROM lead_details WHERE id IN (SELECT id FROM incoming_rows)")
        con.execute("INSERT INTO lead_details BY NAME SELECT * FROM incoming_rows")
        con.unregister("incoming_rows")


MEMBERS = [member for _, member in TEXT_MEMBERS] + ["annualRevenue", "doNotSell"]
# Each body is parsed once: json_extract with a list of paths takes every member in one pass,
# and each small value is typed on its own.
LANDED_UPSERT = f"""
DELETE FROM lead_details WHERE id IN (SELECT id FROM incoming_bodies);
INSERT INTO lead_details
SELECT id,
    {
    ", ".join(
        f"CASE WHEN json_type(v[{i}]) = 'VARCHAR' THEN v[{i}] ->> '$' END"
        for i in range(1, len(TEXT_MEMBERS) + 1)
    )
},
    CASE WHEN json_type(v[{len(MEMBERS) - 1}]) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
         THEN v[{len(MEMBERS) - 1}]::DOUBLE END,
    CASE WHEN json_type(v[{len(MEMBERS)}]) = 'BOOLEAN' THEN v[{len(MEMBERS)}]::BOOLEAN END,
    true, b, $now
FROM (
    SELECT id, b, json_extract(b, {["$." + m for m in MEMBERS]!r}) AS v
    FROM (SELECT id, body::JSON AS b FROM incoming_bodies)
)
"""
STRUCTURES = """
SELECT json_structure(body::JSON)::VARCHAR AS structure, count(*) AS records
FROM incoming_bodies GROUP BY ALL
"""


def landed_table(batch: Bodies) -> pa.Table:
    """A batch's ids and bodies as received, as one Arrow table of two string columns."""
    return pa.table(
        {
            "id": pa.array([lead_id for lead_id, _ in batch], pa.string()),
            "body": pa.array([body for _, body in batch], pa.string()),
        }
    )


def landed(con: duckdb.DuckDBPyConnection, bodies: Bodies) -> None:
    """The alternative: each batch's ids and bodies as one Arrow table, typed and upserted by
    one statement; the drift judged per distinct structure."""
    drift = DriftTally(LEAD_DETAIL_RECORD)
    for start in range(0, len(bodies), BATCH):
        batch = bodies[start : start + BATCH]
        table = landed_table(batch)
        con.register("incoming_bodies", table)
        for structure, records in con.execute(STRUCTURES).fetchall():
            # One made-up record of that structure stands for all of them.
            drift.count([_example(loads(structure))] * records)
        con.execute(LANDED_UPSERT, {"now": datetime.now(UTC)})
        con.unregister("incoming_bodies")


INSERT_ONLY = """
INSERT INTO lead_details
SELECT id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true, body::JSON, $now
FROM incoming_bodies
"""


def inserted(con: duckdb.DuckDBPyConnection, bodies: Bodies) -> None:
    """Only the write: each batch's bodies inserted as records (no typing, no drift, no
    replacing), to weigh what a primary key costs on its own."""
    for start in range(0, len(bodies), BATCH):
        batch = bodies[start : start + BATCH]
        table = landed_table(batch)
        con.register("incoming_bodies", table)
        con.execute(INSERT_ONLY, {"now": datetime.now(UTC)})
        con.unregister("incoming_bodies")


def with_key(con: duckdb.DuckDBPyConnection) -> None:
    """``lead_details`` as the DDL creates it, with a primary key on ``id`` added."""
    con.execute("ALTER TABLE lead_details ADD PRIMARY KEY (id)")
    keys = con.execute(
        "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'lead_details' "
        "AND constraint_type = 'PRIMARY KEY'"
    ).fetchall()
    assert keys == [(1,)], keys


def _example(structure: dict[str, object]) -> dict[str, object]:
    """A record with ``structure``'s members and values of its JSON types."""
    samples = {"VARCHAR": "", "BIGINT": 0, "UBIGINT": 0, "DOUBLE": 0.5, "BOOLEAN": True,
               "NULL": None}  # fmt: skip
    return {name: samples.get(kind, {}) if isinstance(kind, str) else [] for name, kind in
            structure.items()}  # fmt: skip


Design = Callable[[duckdb.DuckDBPyConnection, Bodies], None]


def cpu_of(
    design: Design, bodies: Bodies, repeats: int, keyed: bool = False
) -> tuple[float, duckdb.DuckDBPyConnection]:
    """The least CPU seconds of ``repeats`` runs of ``design``, each on a fresh table (with a
    primary key on ``id`` when ``keyed``); the last run's connection."""
    best = float("inf")
    con = fresh_table()
    for _ in range(repeats):
        con = fresh_table()
        if keyed:
            with_key(con)
        started = time.process_time()
        design(con, bodies)
        best = min(best, time.process_time() - started)
    return best, con


def same_rows(ours: duckdb.DuckDBPyConnection, theirs: duckdb.DuckDBPyConnection) -> bool:
    """Whether both stored the same typed columns and the same records (as JSON values)."""
    columns = "id, email, name, company, phone, category, status, purchase_status, " \
              "assigned_contractor, assigned_bu, annual_revenue, do_not_sell, found"  # fmt: skip
    query = f"SELECT {columns}, record::VARCHAR FROM lead_details ORDER BY id"
    a, b = ours.execute(query).fetchall(), theirs.execute(query).fetchall()
    if len(a) != len(b):
        return False
    return all(x[:-1] == y[:-1] and loads(x[-1]) == loads(y[-1]) for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    bodies = sandbox_bodies(options.scale)
    spent_today, ours = cpu_of(today, bodies, options.repeats)
    spent_landed, theirs = cpu_of(landed, bodies, options.repeats)
    unkeyed, _ = cpu_of(inserted, bodies, options.repeats)
    keyed, _ = cpu_of(inserted, bodies, options.repeats, keyed=True)
    per_record = 1e6 / len(bodies)
    print(json.dumps({
        "records": len(bodies),
        "today_cpu_s": round(spent_today, 3),
        "landed_cpu_s": round(spent_landed, 3),
        "today_us_per_record": round(spent_today / len(bodies) * 1e6, 1),
        "landed_us_per_record": round(spent_landed / len(bodies) * 1e6, 1),
        "landed / today": round(spent_landed / spent_today, 3),
        "same_rows": same_rows(ours, theirs),
        "insert_only_us_per_record": round(unkeyed * per_record, 1),
        "insert_only_with_primary_key_us_per_record": round(keyed * per_record, 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
