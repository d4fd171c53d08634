"""Section 1 of the results file: the full sync against the fetch floors and the land-and-model
floor, in wall time and CPU time, and the full sync's steps."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from bench.findings import SyncRun
from bench.land_floor import LAND_FLOOR_LABEL, LAND_FLOOR_PARTS, floor_summary
from bench.results.report_base import ReportBase
from bench.results.tables import median, steps_slowest_first, table
from bench.results.targets import (
    SYNC_CPU_TARGET,
    SYNC_WALL_TARGET,
    UPSTREAM_CPU_TARGET,
    fetched_as_floor,
)

# The floors' names in the CPU table, by the client the suite names them with.
FLOOR_NAMES = {"raw": "floor: raw", "aiohttp": "floor: aiohttp", "land": "land-and-model floor"}


def _missed(runs: Sequence[int] | None) -> str:
    """The replay misses of a kind of run, summed over its runs (a dash when not measured)."""
    return "–" if runs is None else f"{sum(runs):,}"


class FloorsSection(ReportBase):
    """1. Full sync vs the floors."""

    def floors(self) -> None:
        """The floors' and full syncs' wall time at the first scale, the wall ratio judged,
        then the CPU time of the same runs."""
        found = self.found
        scale = self.first
        raw, tight = found.raw_floor.get(scale, []), found.aiohttp_floor.get(scale, [])
        land = found.land_floor.get(scale, [])
        full = [r.seconds for r in found.full.get(scale, [])]
        if not (raw and tight and full):
            return
        fetched = f"{found.floor_requests[scale]:,}"
        misses = found.replay_misses.get(scale, {})
        rows = [
            [*self.row("floor: raw asyncio HTTP/1.1 client, s", raw, ".1f"), fetched,
             _missed(misses.get("raw floor"))],
            [*self.row("floor: aiohttp (a general-purpose client), s", tight, ".1f"), fetched,
             _missed(misses.get("aiohttp floor"))],
            *([[*self.row(LAND_FLOOR_LABEL + ", s", land, ".1f"), fetched,
                _missed(misses.get("land floor"))]] if land else []),
            [*self.row("`ductwork sync`, full (whole process), s", full, ".1f"),
             f"{found.full[scale][-1].requests:,}", _missed(misses.get("full sync"))],
        ]  # fmt: skip
        own = median(full) / median(tight)
        physical = median(full) / median(raw)
        recording = found.replay_recording_s.get(scale)
        self.body += [f"### 1. Full sync vs the two fetch floors, scale `{scale}`", ""]
        self.body += [
            "Both floors fetch exactly the sync's requests with 8 in flight (`bench/fetch_floor.py`"
            "), interleaved with the syncs; the sync is a whole `uv run --frozen ductwork sync` "
            "process on a fresh data folder's instance on disk. All of them fetch from the replay "
            "upstream (`sandbox/replay.py`): the sandbox's answers to every request of a full "
            "sync, recorded once by the raw floor's walk"
            + (f" ({recording:.0f} s)" if recording else "")
            + " and written back from memory, so that the upstream costs little of the two "
            "cores; a request it has no recording for is a miss (a 404), counted per run. "
            "The land-and-model floor (`bench/land_floor.py`) is the raw floor's fetches with "
            "every body landed in DuckDB as it arrives, then the three largest streams (lead "
            "details, digital assets, the lead list) turned into their typed columns and each "
            "record's text by one SQL statement each: the least a sync built as *land, then "
            "model* spends, before any upsert, history, drift tally, check or publish.",
            "",
        ]
        self.body += table([*self.run_header("run"), "upstream requests", "replay misses"], rows)
        faithful = fetched_as_floor(found, scale)
        word = self.verdict(
            f"full sync wall / raw floor wall ({scale})", f"{physical:.2f}",
            f"≤ {SYNC_WALL_TARGET:g}", faithful and physical <= SYNC_WALL_TARGET,
        )  # fmt: skip
        self.body += [
            f"sync / raw floor = **{physical:.2f}** (target ≤ {SYNC_WALL_TARGET:g}: {word}); "
            f"sync / aiohttp floor = {own:.2f} (a row, no target)."
            + ("" if faithful else " The sync's requests were not the floor's (a replay miss, "
               "or another count): every verdict against the floor is missed."),
            "",
        ]  # fmt: skip
        self.cpu(scale)

    def cpu(self, scale: str) -> None:
        """Where the cores went in the same runs: each process's CPU seconds (user + system,
        ``wait4`` rusage, start-up included) and the sandbox's during it."""
        found = self.found
        if not (found.floor_cpu and found.full.get(scale)):
            return
        full = found.full[scale]
        rows = [
            self.row(f"{FLOOR_NAMES[client]}, CPU s", found.floor_cpu[client], ".1f")
            for client in FLOOR_NAMES
            if client in found.floor_cpu
        ]
        rows += [
            self.row(f"replay upstream during the {client} floor, CPU s", upstream, ".1f")
            for client, upstream in found.floor_upstream_cpu.items()
        ]
        rows += [
            self.row("`ductwork sync`, CPU s", [r.cpu_s for r in full], ".1f"),
            self.row("replay upstream during the sync, CPU s",
                     [r.upstream_cpu_s for r in full], ".1f"),
            self.row("`ductwork sync`, CPU s per wall s", [r.cpu_s / r.seconds for r in full]),
        ]  # fmt: skip
        cores = os.cpu_count() or 1
        bounds = [(r.cpu_s + r.upstream_cpu_s) / cores for r in full]
        rows.append(self.row(f"(sync + upstream CPU s) / {cores} cores, s", bounds, ".1f"))
        self.body += [
            "CPU time of the same runs: each process's user + system seconds from `wait4`, "
            "start-up included, and the replay upstream's meanwhile (from `/proc`). "
            f"{cores} cores serve all of them.",
            "",
        ]
        self.body += table(self.run_header("run"), rows)
        self.cpu_verdicts(scale)
        raw = found.raw_floor.get(scale)
        if raw:
            bound = median(bounds)
            self.body += [
                "The last row is the least a sync doing the same CPU work could take, had it "
                f"kept every core busy from start to end: {bound:.1f} s, "
                f"{bound / median(raw):.2f} × the raw floor's median. No overlap brings "
                "the full sync's ratio to that floor below this; only less CPU work can.",
                "",
            ]
        self.land_floor(scale)
        self.full_sync_steps(full)

    def cpu_verdicts(self, scale: str) -> None:
        """The full sync's CPU and the replay's during the raw floor, each against the raw
        floor client's CPU, judged."""
        found = self.found
        client_cpu = found.floor_cpu.get("raw", [])
        if not client_cpu:
            return
        faithful = fetched_as_floor(found, scale)
        cpu = median(r.cpu_s for r in found.full[scale]) / median(client_cpu)
        a = self.verdict(
            f"full sync CPU / raw floor CPU ({scale})", f"{cpu:.2f}",
            f"≤ {SYNC_CPU_TARGET:g}", faithful and cpu <= SYNC_CPU_TARGET,
        )  # fmt: skip
        upstream = median(found.floor_upstream_cpu.get("raw", [])) / median(client_cpu)
        b = self.verdict(
            f"upstream CPU during the raw floor / floor client CPU ({scale})",
            f"{upstream:.2f}", f"≤ {UPSTREAM_CPU_TARGET}",
            faithful and upstream <= UPSTREAM_CPU_TARGET,
        )  # fmt: skip
        self.body += [
            f"sync CPU / raw floor CPU = **{cpu:.2f}** (target ≤ {SYNC_CPU_TARGET:g}: "
            f"{a}); the replay's CPU during the raw floor / the floor client's = "
            f"**{upstream:.2f}** (target ≤ {UPSTREAM_CPU_TARGET}: {b}).",
            "",
        ]

    def full_sync_steps(self, full: Sequence[SyncRun]) -> None:
        """The steps of the full syncs, as ``ductwork sync`` reports them, slowest first."""
        names = steps_slowest_first(full)
        step_rows = [
            self.row(name, [run.steps.get(name, math.nan) for run in full], ".1f") for name in names
        ]
        self.body += ["Steps of the same full syncs, as `ductwork sync` reports them (s):", ""]
        self.body += table(self.run_header("step"), step_rows)

    def land_floor(self, scale: str) -> None:
        """The land-and-model floor's parts, and the least CPU ratio it leaves the sync's design
        (a reference beside the sync's targets: no verdict of its own)."""
        found = self.found
        reports = found.land_floor_reports.get(scale, [])
        raw_cpu, land_cpu = found.floor_cpu.get("raw", []), found.floor_cpu.get("land", [])
        raw_wall, land_wall = found.raw_floor.get(scale, []), found.land_floor.get(scale, [])
        if not (reports and raw_cpu and land_cpu and raw_wall and land_wall):
            return
        rows = [
            self.row(label, [report[key] for report in reports], ".1f")
            for label, key in LAND_FLOOR_PARTS
        ]
        self.body += ["The land-and-model floor's parts, as it times them itself:", ""]
        self.body += table(self.run_header("part"), rows)
        dagster = None
        if found.noop_run_cpu and found.startup_floor_cpu:
            dagster = median(found.noop_run_cpu) - median(found.startup_floor_cpu)
        line = floor_summary(
            median(land_cpu),
            median(raw_cpu),
            median(land_wall) / median(raw_wall),
            dagster,
            SYNC_CPU_TARGET,
        )
        self.body += [line, ""]
