"""The suite's parts that run whole ``ductwork sync`` processes: full syncs interleaved with the
floors, the dlt peer beside a sync, and the incremental runs beside the start-up floor and a
no-op Dagster run."""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.findings import GIB, MIB, Findings, SyncRun
from bench.launching import LAUNCH, NOOP_RUN, ROOT, STARTUP_FLOOR
from bench.measuring import Measured, measured
from bench.upstreams import (
    BUCKET,
    KEY,
    Replay,
    Upstream,
    UpstreamCost,
    UpstreamProcess,
    floor_command,
    land_floor_command,
    replaying,
    upstream_cost,
)
from ductwork.settings import upstream_environment
from pipelines.processes import ProcessGroup

# The large scale's cost in the budget: its full syncs take about this many times the medium
# one, plus the sandbox's start-up and the serving mix (seconds).
LARGE_FACTOR = 6
LARGE_FIXED_S = 120
STEP_LINE = re.compile(r"^\s+ok\s+(\S+)\s.*\((\d+(?:\.\d+)?) s\)\s*$")
RUN_LINE = re.compile(r"^run \S+: success in (\d+(?:\.\d+)?) s")


class SyncParts:
    """The suite's state (its options, work folder and findings) and its parts made of syncs."""

    def __init__(self, options: argparse.Namespace, work: Path) -> None:
        self.options = options
        self.work = work
        self.log = work / "children.log"
        self.found = Findings()
        self.homes = 0

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to the part ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            self.found.part_s[name] = self.found.part_s.get(name, 0.0) + spent

    def new_home(self) -> Path:
        """A fresh, empty data folder in the work folder."""
        self.homes += 1
        home = self.work / f"home-{self.homes}"
        home.mkdir()
        return home

    def sync(self, up: UpstreamProcess, home: Path) -> SyncRun:
        """``uv run --frozen ductwork sync`` from the repository root on ``home``'s instance."""
        env = {
            "DUCTWORK_HOME": str(home),
            **upstream_environment(up.url, KEY, up.s3_url, BUCKET),
        }
        command = [*LAUNCH, "ductwork", "sync"]
        result, cost = upstream_cost(up, lambda: measured(command, self.log, env, ROOT))
        steps = {}
        for line in result.stdout.splitlines():
            if match := STEP_LINE.match(line):
                steps[match[1]] = float(match[2])
            elif match := RUN_LINE.match(line):
                steps["(the run, as ductwork reports it)"] = float(match[1])
        return SyncRun(
            result.seconds, result.peak_rss, cost.requests, home, steps, result.cpu_s,
            cost.cpu_s, cost.misses,
        )  # fmt: skip

    def startup_floor(self) -> Measured:
        """A process started as the sync is, that only imports dagster and duckdb."""
        return measured(STARTUP_FLOOR, self.log, None, ROOT)

    def noop_run(self, dagster_home: Path) -> Measured:
        """A Dagster run of one no-op asset on an instance set up as the sync's, started alike."""
        return measured([*NOOP_RUN, str(dagster_home)], self.log, None, ROOT)

    def floor(self, up: UpstreamProcess, client: str) -> tuple[float, Measured, UpstreamCost]:
        """The floor's own timing of its work, the whole process and the upstream's cost;
        ``client`` is a fetch floor's (``raw``, ``aiohttp``) or ``land``, the land-and-model
        floor."""
        if client == "land":
            command = land_floor_command(up.url, self.work / "land-floor.duckdb")
        else:
            command = floor_command(up.url, client)
        result, cost = upstream_cost(up, lambda: measured(command, self.log))
        return result.report["seconds"], result, cost

    def peer(self, up: Upstream) -> tuple[Measured, int]:
        """One dlt peer run against ``up`` in a folder of its own (removed after): the whole
        process, and the upstream requests it made."""
        folder = self.work / f"peer-{up.scale}-{len(self.found.peer.get(up.scale, []))}"
        command = [sys.executable, "-m", "bench.dlt_peer", "--url", up.url,
                   "--api-key", KEY, "--dir", str(folder)]  # fmt: skip
        try:
            result, cost = upstream_cost(up, lambda: measured(command, self.log))
            return result, cost.requests
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def full_vs_floors(self, up: UpstreamProcess, runs: int, floors: bool) -> SyncRun:
        """Interleaved: the raw floor, the aiohttp floor, the land-and-model floor, a full sync;
        ``runs`` times, against ``up`` (the replay at the first scale, the sandbox at large,
        without floors). Returns the last full sync."""
        replayed = isinstance(up, Replay)
        scale = up.scale
        found = self.found
        found.full[scale] = []
        for _ in range(runs):
            if floors:
                kinds = (
                    ("raw", found.raw_floor), ("aiohttp", found.aiohttp_floor),
                    ("land", found.land_floor),
                )  # fmt: skip
                for client, into in kinds:
                    name = "land-and-model floor" if client == "land" else f"fetch floor, {client}"
                    with self.part(f"{name} ({scale})"):
                        seconds, process, cost = self.floor(up, client)
                    into.setdefault(scale, []).append(seconds)
                    if client == "land":
                        found.land_floor_reports.setdefault(scale, []).append(process.report)
                    found.floor_requests[scale] = cost.requests
                    found.floor_cpu.setdefault(client, []).append(process.cpu_s)
                    found.floor_upstream_cpu.setdefault(client, []).append(cost.cpu_s)
                    if replayed:
                        self.replay_missed(scale, f"{client} floor", cost.misses)
                    print(f"[{scale}] {client} floor {seconds:.1f}s", flush=True)
            with self.part(f"full syncs ({scale})"):
                run = self.sync(up, self.new_home())
            found.full[scale].append(run)
            if replayed:
                self.replay_missed(scale, "full sync", run.replay_misses)
            print(
                f"[{scale}] full sync {run.seconds:.1f}s, {run.peak_rss / MIB:.0f} MiB", flush=True
            )
        for run in found.full[scale][:-1]:
            shutil.rmtree(run.home, ignore_errors=True)
        return found.full[scale][-1]

    def replayed_and_sandbox_syncs(self, up: Upstream, group: ProcessGroup) -> SyncRun:
        """The floors and full syncs against the replay of ``up``, then one full sync against
        the sandbox itself, which it returns: the later parts mutate the sandbox and go on
        from that sync's data folder."""
        scale = up.scale
        with replaying(up, group, self.work, self.log) as replay:
            self.found.replay_recording_s[scale] = replay.recording_s
            self.found.part_s[f"replay recording ({scale})"] = replay.recording_s
            print(f"[{scale}] replay up in {replay.recording_s:.0f}s", flush=True)
            replayed = self.full_vs_floors(replay, self.options.runs, floors=True)
        shutil.rmtree(replayed.home, ignore_errors=True)
        with self.part(f"full sync against the sandbox ({scale})"):
            run = self.sync(up, self.new_home())
        self.found.sandbox_full[scale] = run
        print(f"[{scale}] full sync against the sandbox {run.seconds:.1f}s", flush=True)
        return run

    def replay_missed(self, scale: str, run: str, misses: int) -> None:
        """Record a run's replay misses; a run with any is named in the notes."""
        self.found.replay_misses.setdefault(scale, {}).setdefault(run, []).append(misses)
        if misses:
            self.found.notes.append(
                f"{run} ({scale}): the replay upstream had no recorded answer for {misses:,} of "
                "its requests (answered 404): that run fetched less than a full sync does."
            )
            print(f"[{scale}] {run}: {misses} replay misses", flush=True)

    def peer_runs(self, up: Upstream, started: float) -> None:
        """The dlt peer ``--dlt-runs`` times, each just after a full ``ductwork sync`` against
        the same sandbox on a fresh data folder (the other side of its ratio); fewer if the
        next pair would leave too little of the budget for the large scale (estimated from
        this scale's full syncs)."""
        options = self.options
        for index in range(options.dlt_runs):
            if index and len(options.scales) > 1:
                spent = time.perf_counter() - started
                dlt = statistics.median(m.seconds for m in self.found.peer[up.scale])
                dlt += statistics.median(r.seconds for r in self.found.peer_ours[up.scale])
                # The large scale's syncs run against the sandbox, as this one did.
                sync = self.found.sandbox_full[up.scale].seconds
                large = LARGE_FACTOR * sync * options.large_runs + LARGE_FIXED_S
                if spent + dlt + large > options.budget_min * 60:
                    self.found.notes.append(
                        f"dlt ran {index} time(s) instead of {options.dlt_runs}: another run "
                        f"(about {dlt:.0f} s) would have left less than the large scale's "
                        f"estimated {large:.0f} s of the {options.budget_min}-minute budget."
                    )
                    return
            with self.part(f"dlt peer ({up.scale})"):
                home = self.new_home()
                ours = self.sync(up, home)
                shutil.rmtree(home)  # only its time and memory are kept
                result, requests = self.peer(up)
            self.found.peer_ours.setdefault(up.scale, []).append(ours)
            self.found.peer.setdefault(up.scale, []).append(result)
            self.found.peer_requests[up.scale] = requests
            print(
                f"[{up.scale}] ductwork sync {ours.seconds:.1f}s, then dlt "
                f"{result.report['seconds']:.1f}s, {result.peak_rss / GIB:.2f} GiB",
                flush=True,
            )

    def incremental(self, up: Upstream, home: Path) -> None:
        """The start-up floor, a no-op Dagster run and no-change syncs interleaved, then runs
        after 1 % changed."""
        runs = self.options.runs
        noop_home = self.new_home()
        self.noop_run(noop_home)  # unmeasured: its first run creates the instance's databases
        for _ in range(runs):
            floor = self.startup_floor()
            self.found.startup_floor.append(floor.seconds)
            self.found.startup_floor_rss.append(floor.peak_rss)
            self.found.startup_floor_cpu.append(floor.cpu_s)
            noop = self.noop_run(noop_home)
            self.found.noop_run.append(noop.seconds)
            self.found.noop_run_cpu.append(noop.cpu_s)
            self.found.no_change.append(self.sync(up, home))
        stats = up.stats()
        counts = {"assets_updated": stats["assets"] // 100, "leads_changed": stats["leads"] // 100}
        self.found.mutation = counts
        for _ in range(runs):
            up.mutate(counts)
            self.found.changed.append(self.sync(up, home))
        print(
            f"[{up.scale}] start-up floor {[round(s, 2) for s in self.found.startup_floor]}, "
            f"no-op Dagster run {[round(s, 2) for s in self.found.noop_run]}, "
            f"no change {[round(r.seconds, 2) for r in self.found.no_change]}, after 1% "
            f"{[round(r.seconds, 2) for r in self.found.changed]}",
            flush=True,
        )
