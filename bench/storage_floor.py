"""The least CPU a full sync can spend on this machine, measured in parts.

    uv run --frozen --group bench python -m bench.storage_floor [--scale medium] [--runs 3]

A full sync fetches every answer and stores every record; it starts as a process that imports
dagster and duckdb. Each of the three is measured here alone, in one run, side by side:

- **fetch**: the raw floor (``bench.fetch_floor --client raw``), every request of a full sync
  against the replay upstream, 8 in flight: its process's CPU from ``wait4``;
- **start-up**: a process started as the sync is that only imports dagster and duckdb (the
  suite's start-up floor);
- **store once**: every record of those answers written once into a DuckDB file as the sync
  configures DuckDB (one thread, the sync's memory limit), with none of the sync's other work:
  the bodies handed to DuckDB as received (one Arrow column of text), each page's ``data``
  array split into its records by DuckDB, every other body kept whole as one record (which
  under-counts records, so it can only make the floor lower), one table, no key, no typed
  column, no history, committed in batches of about ten thousand records, then checkpointed.
  Three ways: DuckDB's own choice of compression (what the warehouse gets today), none, zstd.

The floor of a sync is fetch + start-up + the cheapest store; printed beside the full-sync CPU
target (at most 2.5 times the raw floor's CPU) with what the target leaves for everything else
a sync does (typed columns, keys, history, drift, checks, the publish). A record stored more cheaply
than by DuckDB here would need another store; the floor says nothing about that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from bench.suite import (
    ROOT,
    STARTUP_FLOOR,
    floor_command,
    measured,
    prepare_this_process,
    replaying,
    start_object_store,
    upstream,
)
from ductwork.warehouse.loading import limit_connection
from pipelines.processes import ProcessGroup
from sandbox.recorded_answers import read_recording

# The full sync's CPU target, as a multiple of the raw floor's CPU (bench/results.py).
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
SPLIT = {
    "pages": "INSERT INTO records SELECT unnest(json_extract(body, '$.data[*]')) FROM bodies",
    "records": "INSERT INTO records SELECT json(body) FROM bodies",
}


def store_once(bodies: Bodies, database: Path, compression: str | None) -> tuple[float, int]:
    """Write every record of ``bodies`` once into a new DuckDB file at ``database`` and
    checkpoint it; returns the CPU seconds it took (this process, DuckDB's threads included)
    and how many records were stored."""
    for path in (database, database.with_name(database.name + ".wal")):
        path.unlink(missing_ok=True)
    con = duckdb.connect(str(database))
    try:
        limit_connection(con)
        if compression is not None:
            con.execute(f"SET force_compression = '{compression}'")
        con.execute("CREATE TABLE records (record JSON)")
        started = time.process_time()
        for kind, batch in bodies.batches():
            text = pa.array(batch, pa.binary()).cast(pa.string())
            con.register("bodies", pa.table({"body": text}))
            con.execute("BEGIN TRANSACTION")
            con.execute(SPLIT[kind])
            con.execute("COMMIT")
            con.unregister("bodies")
        con.execute("CHECKPOINT")
        cpu_s = time.process_time() - started
        stored = con.execute("SELECT count(*) FROM records").fetchone()
    finally:
        con.close()
    return cpu_s, stored[0] if stored else 0


@dataclass(frozen=True)
class Floor:
    """Median CPU seconds of each part, and the full sync's CPU target against them."""

    fetch_s: float
    startup_s: float
    store_s: dict[str, float]

    @property
    def cheapest_store(self) -> tuple[str, float]:
        """The way of storing that cost least, and its CPU seconds."""
        return min(self.store_s.items(), key=lambda item: item[1])

    @property
    def floor_s(self) -> float:
        """Fetch + start-up + the cheapest store: the least CPU a full sync can spend."""
        return self.fetch_s + self.startup_s + self.cheapest_store[1]

    @property
    def budget_s(self) -> float:
        """The full sync's CPU target in seconds (``CPU_TARGET`` times the raw floor)."""
        return CPU_TARGET * self.fetch_s

    @property
    def left_s(self) -> float:
        """What the target leaves for all else a sync does (negative: the floor is above it)."""
        return self.budget_s - self.floor_s

    def report(self) -> dict[str, object]:
        """The figures, rounded, as printed."""
        way, _ = self.cheapest_store
        return {
            "fetch_cpu_s": round(self.fetch_s, 2),
            "startup_cpu_s": round(self.startup_s, 2),
            "store_once_cpu_s": {name: round(s, 2) for name, s in self.store_s.items()},
            "cheapest_store": way,
            "floor_cpu_s": round(self.floor_s, 2),
            "floor / fetch": round(self.floor_s / self.fetch_s, 2),
            "target_cpu_s": round(self.budget_s, 2),
            "left_for_the_rest_s": round(self.left_s, 2),
        }


def median_floor(
    fetch: Sequence[float], startup: Sequence[float], store: dict[str, Sequence[float]]
) -> Floor:
    """The floor of the medians of each part's runs."""
    return Floor(
        statistics.median(fetch),
        statistics.median(startup),
        {name: statistics.median(runs) for name, runs in store.items()},
    )


def measure(scale: str, runs: int, work: Path) -> tuple[Floor, int]:
    """Start the sandbox and its replay at ``scale``, then ``runs`` rounds of fetch, start-up
    and the three stores, interleaved; returns the floor and the records stored. A replay
    that missed a request (answered it 404) fails the run: the fetch was not the sync's."""
    log = work / "children.log"
    fetch: list[float] = []
    startup: list[float] = []
    store: dict[str, list[float]] = {name: [] for name in COMPRESSIONS}
    stored = 0
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
                fetch.append(measured(raw, log).cpu_s)
                startup.append(measured(STARTUP_FLOOR, log, None, ROOT).cpu_s)
                for name, compression in COMPRESSIONS.items():
                    cpu_s, stored = store_once(bodies, work / "records.duckdb", compression)
                    store[name].append(cpu_s)
                print(
                    f"round {round_number}: fetch {fetch[-1]:.2f} s, start-up {startup[-1]:.2f} s, "
                    + ", ".join(f"store ({name}) {store[name][-1]:.2f} s" for name in store),
                    flush=True,
                )
            missed = replay.stats()["misses"]
            if missed:
                # A miss is a request the raw floor did not fetch as a sync would.
                raise RuntimeError(f"the replay missed {missed} requests: no fetch figure")
    return median_floor(fetch, startup, store), stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--runs", type=int, default=3, help="rounds (each figure: the median)")
    options = parser.parse_args()
    os.chdir(ROOT)  # `uv run` finds the project from the working directory
    prepare_this_process()
    with tempfile.TemporaryDirectory(prefix="ductwork-floor-") as work:
        floor, stored = measure(options.scale, options.runs, Path(work))
    way, store_s = floor.cheapest_store
    print(
        f"records stored once: {stored:,}\n"
        f"CPU, median of {options.runs}: fetch {floor.fetch_s:.2f} s + start-up "
        f"{floor.startup_s:.2f} s + store once ({way}) {store_s:.2f} s = floor "
        f"{floor.floor_s:.2f} s, {floor.floor_s / floor.fetch_s:.2f} × the fetch\n"
        f"full-sync CPU target (≤ {CPU_TARGET} × the fetch): {floor.budget_s:.2f} s, leaving "
        f"{floor.left_s:.2f} s for everything else a sync does"
    )
    print(json.dumps({"records": stored, **floor.report()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
