"""The least CPU a full sync can spend on this machine, measured in parts.

    uv run --frozen --group bench python -m bench.storage_floor [--scale medium] [--runs 3]

A full sync fetches every answer and stores every record; it starts as a process that imports
dagster and duckdb, and runs as a Dagster job. Each part is measured here alone, in one run,
side by side:

- **fetch**: the raw floor (``bench.fetch_floor --client raw``), every request of a full sync
  against the replay upstream, 8 in flight: its process's CPU from ``wait4``;
- **start-up**: a process started as the sync is that only imports dagster and duckdb (the
  suite's start-up floor);
- **a Dagster run like the sync's**: ``bench.noop_run --like-sync``, started alike, which
  imports ductwork's definitions and runs as many no-op steps as the ``sync_all`` job on an
  instance set up as the sync's;
- **store once**: every record of those answers written once into a DuckDB file as the sync
  configures DuckDB (one thread, the sync's memory limit, raised as the sync raises it when a
  batch runs out of memory), with none of the sync's other work: the bodies handed to DuckDB
  as received (one Arrow column of text), each page's ``data`` array split into its records by
  DuckDB, every other body kept whole as one record (which under-counts records, so it can only
  make the floor lower), one table, no key, no typed column, no history, committed in batches
  of about ten thousand records, then checkpointed;
- **store keyed, with a version**: the same records, each under a key in a table with a
  primary key (a record already stored under its key is skipped), and a version row per record
  in a history (key, valid from, current, a 64-bit hash of the record): what a mirror that
  upserts by key and remembers versions writes at least. Keyed two ways: **by id**, the value
  of the record's first member (the id, in this contract's records; a whole body's key marked
  apart from a list record's; records of different streams that share it, such as a catalog
  item and its unit type's, stored once, which can only make the floor lower), and **by
  position**, the record's number in the store (an integer, no member read: the least any key
  can cost).

Each store is timed under DuckDB's own choice of compression (what the warehouse gets today),
none and zstd, and the cheapest counts. Three floors are printed beside the full-sync CPU
target (at most 2.5 times the raw floor's CPU), each with what the target leaves beyond it:
fetch + start-up + the store once, and the mirror's two (fetch + the Dagster run + a keyed
store), beyond which the rest of a sync (typed columns, drift, checks, the publish) must fit.
A record stored more cheaply than by DuckDB here would need another store; the floors say
nothing about that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from bench.launching import NOOP_RUN, ROOT, STARTUP_FLOOR, prepare_this_process
from bench.measuring import measured
from bench.upstreams import floor_command, replaying, start_object_store, upstream
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.opening import limit_connection
from pipelines.processes import ProcessGroup
from sandbox.recorded_answers import read_recording

# The full sync's CPU target, as a multiple of the raw floor's CPU (``bench.results.targets``).
CPU_TARGET = 2.5
# About the records a sync commits at once: ten thousand details, or ten pages of a thousand.
BATCH_RECORDS = 10_000
# A page whose body begins so within its first bytes carries its records in a ``data`` array.
PAGE_MARK = b'"data":['
PAGE_MARK_WITHIN = 64
COMPRESSIONS = {"DuckDB's choice": None, "none": "uncompressed", "zstd": "zstd"}


@dataclass(frozen=True)
class Bodies:
    """The bodies of a recording: list pages (records in ``data``) and whole-record bodies."""

    pages: list[bytes]
    records: list[bytes]

    @classmethod
    def of_recording(cls, path: Path) -> Bodies:
        """Every answer body of a replay recording, sorted into pages and records."""
        pages, records = [], []
        for answer in read_recording(path).values():
            body = answer.split(b"\r\n\r\n", 1)[1]
            (pages if PAGE_MARK in body[:PAGE_MARK_WITHIN] else records).append(body)
        return cls(pages, records)

    def batches(self) -> Iterator[tuple[str, list[bytes]]]:
        """("pages" or "records", bodies) in batches of about ``BATCH_RECORDS`` records; a page
        counted as a thousand."""
        for kind, bodies, per_batch in (
            ("pages", self.pages, max(1, BATCH_RECORDS // 1000)),
            ("records", self.records, BATCH_RECORDS),
        ):
            for start in range(0, len(bodies), per_batch):
                yield kind, bodies[start : start + per_batch]


# Records out of a batch of bodies (the Arrow table ``bodies``, one text column ``body``).
RECORDS_OF = {
    "pages": "SELECT unnest(json_extract(body, '$.data[*]')) AS record FROM bodies",
    "records": "SELECT json(body) AS record FROM bodies",
}
# What a store runs: its tables, then its statement for each kind of batch.
Statements = tuple[str, dict[str, str]]
# Stored once: one table of records.
ONCE: Statements = (
    "CREATE TABLE records (record JSON)",
    {kind: f"INSERT INTO records {query}" for kind, query in RECORDS_OF.items()},
)


def keyed(key_type: str, key: str, whole_mark: str = "", before: str = "") -> Statements:
    """Stored keyed, with a version: each record under ``key`` (an expression of ``record``)
    in a table with a primary key of ``key_type``, a record already stored under its key
    skipped, and a version row per record in a history (its key, valid from, current, a hash of
    the record to tell a change by). ``whole_mark`` is appended to a whole body's key;
    ``before`` creates what ``key`` needs."""
    tables = (
        f"{before}CREATE TABLE records (key {key_type} PRIMARY KEY, record JSON); "
        f"CREATE TABLE versions (key {key_type} NOT NULL, valid_from TIMESTAMPTZ NOT NULL, "
        "is_current BOOLEAN NOT NULL, record_hash UBIGINT NOT NULL)"
    )
    return tables, {
        kind: f"CREATE OR REPLACE TEMP TABLE batch AS SELECT {key}{mark} AS key, record "
        f"FROM ({RECORDS_OF[kind]}); "
        "INSERT OR IGNORE INTO records SELECT key, record FROM batch; "
        "INSERT INTO versions SELECT key, now(), true, hash(record) FROM batch; "
        "DROP TABLE batch"
        for kind, mark in (("pages", ""), ("records", whole_mark))
    }


# The stores, by name. "keyed by id": the key is the value of the record's first member (the id,
# in this contract's records), read in one pass over the record (an object without members: its
# digest), a whole body's marked apart from a list record's. "keyed by position": the key is
# the record's number in the store, the least any key can cost (no member read, an integer).
STORES: dict[str, Statements] = {
    "once": ONCE,
    "keyed by id": keyed(
        "VARCHAR",
        "coalesce(json_extract_string(record, '$.*')[1], md5(record::VARCHAR))",
        " || '#whole'",
    ),
    "keyed by position": keyed(
        "BIGINT", "nextval('positions')", before="CREATE SEQUENCE positions; "
    ),
}


def floor_name(kind: str) -> str:
    """The name of the floor built on the store ``kind``, as ``Floor.report`` names it."""
    return "store once" if kind == "once" else f"mirror, {kind}"


def store(bodies: Bodies, database: Path, kind: str, compression: str | None) -> tuple[float, int]:
    """Write every record of ``bodies`` as the store ``kind`` of ``STORES`` writes them into a
    new DuckDB file at ``database`` under ``compression`` (a ``COMPRESSIONS`` value), a
    transaction per batch, and checkpoint it; returns the CPU seconds it took (this process,
    DuckDB's threads included) and how many records were stored."""
    for path in (database, database.with_name(database.name + ".wal")):
        path.unlink(missing_ok=True)
    tables, of_kind = STORES[kind]
    con = duckdb.connect(str(database))
    try:
        limit_connection(con)
        if compression is not None:
            con.execute(f"SET force_compression = '{compression}'")
        con.execute(tables)
        started = time.process_time()
        for batch_kind, batch in bodies.batches():
            text = pa.array(batch, pa.binary()).cast(pa.string())
            con.register("bodies", pa.table({"body": text}))
            statements = of_kind[batch_kind]
            with_memory_headroom(con, partial(_commit, con, statements), what="a batch")
            con.unregister("bodies")
        con.execute("CHECKPOINT")
        cpu_s = time.process_time() - started
        stored = con.execute("SELECT count(*) FROM records").fetchone()
    finally:
        con.close()
    return cpu_s, stored[0] if stored else 0


def _commit(con: duckdb.DuckDBPyConnection, statements: str) -> None:
    """``statements`` in a transaction of their own, rolled back if they fail."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(statements)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


@dataclass(frozen=True)
class Floor:
    """Median CPU seconds of each part (each store: by compression), and the full sync's CPU
    target against them."""

    fetch_s: float
    startup_s: float
    dagster_run_s: float
    store_s: dict[str, dict[str, float]]

    def cheapest(self, kind: str) -> tuple[str, float]:
        """The compression under which the store ``kind`` cost least, and its CPU seconds."""
        return min(self.store_s[kind].items(), key=lambda item: item[1])

    @property
    def floor_s(self) -> float:
        """Fetch + start-up + the cheapest store once: the least CPU a full sync can spend."""
        return self.fetch_s + self.startup_s + self.cheapest("once")[1]

    def mirror_floor_s(self, kind: str) -> float:
        """Fetch + a Dagster run like the sync's + the cheapest keyed store ``kind``: the least
        CPU a sync that runs as a Dagster job, upserts by key and keeps versions can spend."""
        return self.fetch_s + self.dagster_run_s + self.cheapest(kind)[1]

    @property
    def budget_s(self) -> float:
        """The full sync's CPU target in seconds (``CPU_TARGET`` times the raw floor)."""
        return CPU_TARGET * self.fetch_s

    def report(self) -> dict[str, Any]:
        """The figures, rounded, as printed: each floor, its ratio to the fetch and what the
        target leaves beyond it (negative: the floor is above the target)."""
        floors = {
            floor_name(kind): self.floor_s if kind == "once" else self.mirror_floor_s(kind)
            for kind in STORES
        }
        return {
            "fetch_cpu_s": round(self.fetch_s, 2),
            "startup_cpu_s": round(self.startup_s, 2),
            "dagster_run_like_the_sync_cpu_s": round(self.dagster_run_s, 2),
            "store_cpu_s": {
                kind: {way: round(s, 2) for way, s in ways.items()}
                for kind, ways in self.store_s.items()
            },
            "target_cpu_s": round(self.budget_s, 2),
            "floors": {
                name: {
                    "cpu_s": round(cpu_s, 2),
                    "x_fetch": round(cpu_s / self.fetch_s, 2),
                    "target_leaves_s": round(self.budget_s - cpu_s, 2),
                }
                for name, cpu_s in floors.items()
            },
        }


def _each_store() -> dict[str, dict[str, list[float]]]:
    return {kind: {way: [] for way in COMPRESSIONS} for kind in STORES}


@dataclass
class Runs:
    """The CPU seconds of each part, run by run (each store: by compression)."""

    fetch: list[float] = field(default_factory=list)
    startup: list[float] = field(default_factory=list)
    dagster_run: list[float] = field(default_factory=list)
    store: dict[str, dict[str, list[float]]] = field(default_factory=_each_store)

    def floor(self) -> Floor:
        """The floor of the medians of each part's runs."""
        median = statistics.median
        return Floor(
            median(self.fetch),
            median(self.startup),
            median(self.dagster_run),
            {
                kind: {way: median(runs) for way, runs in ways.items()}
                for kind, ways in self.store.items()
            },
        )

    def last_round(self) -> str:
        """The last round's figures, as a line."""
        stores = [
            f"store {kind} ({way}) {runs[-1]:.2f} s"
            for kind, ways in self.store.items()
            for way, runs in ways.items()
        ]
        return ", ".join(
            [
                f"fetch {self.fetch[-1]:.2f} s",
                f"start-up {self.startup[-1]:.2f} s",
                f"Dagster run {self.dagster_run[-1]:.2f} s",
                *stores,
            ]
        )


def measure(scale: str, runs: int, work: Path) -> tuple[Floor, dict[str, int]]:
    """Start the sandbox and its replay at ``scale``, then ``runs`` rounds of every part,
    interleaved; returns the floor and the records each store stored. A replay that missed a
    request (answered it 404) fails the run: the fetch was not the sync's."""
    log = work / "children.log"
    found = Runs()
    stored: dict[str, int] = {}
    dagster_run = [*NOOP_RUN, str(work / "dagster"), "--like-sync"]
    measured(dagster_run, log, None, ROOT)  # unmeasured: its first run creates the instance
    with ProcessGroup() as group:
        s3_url = start_object_store(group)
        with upstream(scale, group, s3_url) as up, replaying(up, group, work, log) as replay:
            bodies = Bodies.of_recording(replay.recording)
            print(
                f"[{scale}] {len(bodies.pages):,} pages and {len(bodies.records):,} other "
                "bodies recorded",
                flush=True,
            )
            raw = floor_command(replay.url, "raw")
            for round_number in range(1, runs + 1):
                found.fetch.append(measured(raw, log).cpu_s)
                found.startup.append(measured(STARTUP_FLOOR, log, None, ROOT).cpu_s)
                found.dagster_run.append(measured(dagster_run, log, None, ROOT).cpu_s)
                for kind in STORES:
                    for way, compression in COMPRESSIONS.items():
                        cpu_s, stored[kind] = store(
                            bodies, work / "records.duckdb", kind, compression
                        )
                        found.store[kind][way].append(cpu_s)
                print(f"round {round_number}: {found.last_round()}", flush=True)
            missed = replay.stats()["misses"]
            if missed:
                # A miss is a request the raw floor did not fetch as a sync would.
                raise RuntimeError(f"the replay missed {missed} requests: no fetch figure")
    return found.floor(), stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--runs", type=int, default=3, help="rounds (each figure: the median)")
    options = parser.parse_args()
    os.chdir(ROOT)  # `uv run` finds the project from the working directory
    prepare_this_process()
    with tempfile.TemporaryDirectory(prefix="ductwork-floor-") as work:
        floor, stored = measure(options.scale, options.runs, Path(work))
    report = floor.report()
    print(f"records stored: {', '.join(f'{kind} {n:,}' for kind, n in stored.items())}")
    print(f"CPU, median of {options.runs}; each store under its cheapest compression:")
    for name, figures in report["floors"].items():
        print(
            f"  {parts_of(floor, name)} = {figures['cpu_s']:.2f} s, {figures['x_fetch']:.2f} × the "
            f"fetch; the target leaves {figures['target_leaves_s']:.2f} s beyond it"
        )
    print(f"full-sync CPU target (≤ {CPU_TARGET} × the fetch): {floor.budget_s:.2f} s")
    print(json.dumps({"records": stored, **report}))
    return 0


def parts_of(floor: Floor, name: str) -> str:
    """The parts of the floor ``name`` of ``Floor.report``, with their seconds."""
    kind = {floor_name(kind): kind for kind in STORES}[name]
    way, store_s = floor.cheapest(kind)
    first = (
        f"start-up {floor.startup_s:.2f} s"
        if kind == "once"
        else f"a Dagster run like the sync's {floor.dagster_run_s:.2f} s"
    )
    return f"fetch {floor.fetch_s:.2f} s + {first} + store {kind} ({way}) {store_s:.2f} s"


if __name__ == "__main__":
    raise SystemExit(main())
