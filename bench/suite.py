"""The benchmark suite of ``make bench``: every figure a ratio between runs made side by side.

Against the sandbox in its own process (and moto for the manuals), at scale medium then large,
every sync a whole ``uv run --frozen ductwork sync`` process on the data folder's instance on
disk, as users start it:

1. full sync vs two fetch floors (``bench.fetch_floor``: aiohttp, the sync's own HTTP library,
   and a minimal raw asyncio HTTP/1.1 client) and the land-and-model floor (``bench.land_floor``:
   the raw client's fetches landed in DuckDB and modelled in SQL), interleaved, median of
   ``--runs``; these run
   against the replay upstream (``sandbox.replay``: the sandbox's answers recorded once, then
   written back from memory), so that on this machine's two cores the upstream costs a fraction
   of the client it answers, and requests it has no recording for are counted as misses;
   then one full sync against the sandbox itself, whose data folder the later parts go on from;
2. that sync vs the dlt ``rest_api`` peer (``bench.dlt_peer``, against the sandbox too: its
   requests are not the sync's, so the replay has no answers for them), tuned as dlt's docs
   allow;
3. no-change runs vs a Dagster run of one no-op asset (``bench.noop_run``), interleaved with
   the start-up floor (``uv run`` of a process importing dagster and duckdb); runs after 1 % of
   assets and leads changed vs the no-change run + 5 % of the full sync;
4. peak RSS of the sync at medium and large (``wait4`` rusage of the ``uv run`` process, which
   counts its waited-for descendants; large against the sandbox, beside medium's sandbox
   sync);
5. serving: ``ductwork serve`` as the CLI starts it vs a bare Starlette app answering the same
   statuses and bytes, on mixes with gzip, filters, 304s and 404s (``bench.serving_mix``),
   loaded by ``wrk`` at saturation; the lookup mix paced at half ductwork's rate by an
   open-loop generator (``bench.open_loop``) measuring latency from each request's due time;
6. snapshot publish time (the ``serving_snapshot`` step the sync reports) at medium and large.

Writes ``bench/RESULTS.md``.

    make bench   # = uv run --frozen --group bench python -m bench.suite
    python -m bench.suite --scales small --runs 1 --dlt-runs 1   # a quick pass
    python -m bench.suite --parts serving   # one full sync per scale, then serving alone
    python -m bench.suite --parts serving --home medium=DIR   # serve DIR's snapshot, no sync
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import httpx

from ductwork.run_worker import proc_stat
from ductwork.settings import upstream_environment
from pipelines.processes import ProcessGroup, installed_command, wait_until_answering
from sandbox.admin_client import SandboxAdmin
from sandbox.local_server import free_socket

KEY = "bench-key"
BUCKET = "ductwork-bench"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GIB = 1024**3
MIB = 1024**2
FAILED_CHILD_LINES = 20  # of a failed child's output, shown in the suite's error
# What ``ductwork serve`` runs with under load: the per-key limit would cap the load generator's
# single key, and the access log would write a line per request.
SERVE_UNDER_LOAD = {
    "DUCTWORK_LOG_LEVEL": "warning",
    "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000000",
}


# ----------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    """One child process: its wall time, its peak RSS, its CPU time (user + system, with the
    descendants it waited for), its output and the JSON it printed last."""

    seconds: float
    peak_rss: int
    report: dict[str, Any]
    stdout: str = ""
    cpu_s: float = 0.0


def measured(
    command: Sequence[str],
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Measured:
    """Run ``command`` to the end through ``bench/rusage_of.py``: its wall time, and from
    ``wait4``'s rusage of that very child its peak RSS (the largest of it and the descendants
    it waited for) and CPU time."""
    with (
        open(log, "ab") as errors,
        tempfile.NamedTemporaryFile(prefix="rusage-", suffix=".json") as usage_file,
    ):
        logged_before = errors.tell()
        child = subprocess.Popen(
            [sys.executable, "-I", str(HERE / "rusage_of.py"), usage_file.name, *command],
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        assert child.stdout is not None
        out = child.stdout.read()
        if child.wait() != 0:
            # The log sits in the suite's temporary folder, gone once the suite stops: what
            # the child printed last, on either stream, goes into the error.
            with open(log, "rb") as written:
                written.seek(logged_before)
                said = [tail(out), tail(written.read())]
            raise RuntimeError(
                f"{' '.join(command[:6])} failed ({child.returncode}); it printed last:\n"
                + "\n".join(part for part in said if part)
            )
        usage = json.loads(Path(usage_file.name).read_text(encoding="utf-8"))
    text = out.decode()
    lines = [line for line in text.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    return Measured(usage["seconds"], usage["peak_rss"], report, text, usage["cpu_s"])


def tail(output: bytes) -> str:
    """The last ``FAILED_CHILD_LINES`` lines of a child's output."""
    return "\n".join(output.decode(errors="replace").strip().splitlines()[-FAILED_CHILD_LINES:])


@dataclass(frozen=True)
class Target:
    """A server under open-loop load: its process (to pin), URL, request file and key."""

    process: subprocess.Popen
    url: str
    paths: Path
    key: str | None


@dataclass
class Upstream:
    """The sandbox (and moto) of one scale."""

    url: str
    s3_url: str
    scale: str
    startup_s: float
    pid: int

    def cpu_s(self) -> float:
        """The sandbox process's CPU time so far (user + system)."""
        return running_cpu_s(self.pid, "the sandbox")

    @property
    def admin(self) -> SandboxAdmin:
        """The sandbox's admin API."""
        return SandboxAdmin(self.url, KEY)

    def stats(self) -> dict[str, int]:
        """The sandbox's record counts."""
        return self.admin.stats()

    def mutate(self, counts: dict[str, int]) -> None:
        """Change that many records of each kind upstream."""
        self.admin.mutate(counts)


@dataclass
class Replay:
    """The replay upstream of one scale, answering from a recording of its sandbox: what the
    full syncs and the fetch floors run against."""

    url: str
    s3_url: str
    scale: str
    recording_s: float  # recording the sandbox's answers, until the replay answered
    pid: int
    recording: Path  # the answers it serves (removed when the replay stops)

    def cpu_s(self) -> float:
        """The replay process's CPU time so far (user + system)."""
        return running_cpu_s(self.pid, "the replay upstream")

    def stats(self) -> dict[str, Any]:
        """Requests answered so far, and misses: those it had no recorded answer for."""
        return httpx.get(f"{self.url}/_replay/stats", timeout=60).json()


class UpstreamProcess(Protocol):
    """An upstream in a process of its own, the sandbox or its replay: where a sync points, what
    it has answered so far and its CPU time."""

    url: str
    s3_url: str
    scale: str

    def cpu_s(self) -> float: ...

    def stats(self) -> dict[str, Any]: ...


def floor_command(url: str, client: str) -> list[str]:
    """The fetch floor of ``client`` (``raw`` or ``aiohttp``) against ``url``, as a command."""
    return [sys.executable, "-m", "bench.fetch_floor", "--url", url, "--api-key", KEY,
            "--client", client]  # fmt: skip


def land_floor_command(url: str, db: Path) -> list[str]:
    """The land-and-model floor against ``url``, landing into the DuckDB file ``db``."""
    return [sys.executable, "-m", "bench.land_floor", "--url", url, "--api-key", KEY,
            "--db", str(db)]  # fmt: skip


def running_cpu_s(pid: int, what: str) -> float:
    """The CPU time so far of a process that must still be running, ``what`` naming it."""
    spent = process_cpu_s(pid)
    if spent is None:
        raise RuntimeError(f"{what} (pid {pid}) is gone")
    return spent


def process_cpu_s(pid: int) -> float | None:
    """A process's CPU time so far (user + system); None once it is gone."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    # utime and stime: fields 14 and 15 of proc(5), items 11 and 12 here.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def upstream(scale: str, group: ProcessGroup, s3_url: str) -> Iterator[Upstream]:
    """The sandbox of ``scale`` in its own process, stopped on exit."""
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    sandbox = group.start(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--port",
            str(port),
            "--scale",
            scale,
            "--api-key",
            KEY,
            "--s3-endpoint-url",
            s3_url,
            "--s3-bucket",
            BUCKET,
        ]
    )
    try:
        wait_until_answering(url + "/healthz", sandbox, timeout_s=1200)
        yield Upstream(url, s3_url, scale, time.perf_counter() - started, sandbox.pid)
    finally:
        stop(sandbox)


@contextmanager
def replaying(up: Upstream, group: ProcessGroup, work: Path, log: Path) -> Iterator[Replay]:
    """The replay upstream of ``up``'s scale in its own process, stopped on exit: every answer
    a full sync fetches recorded from ``up`` (``bench.fetch_floor --record``), then served."""
    recording = work / f"replay-{up.scale}.recording"
    started = time.perf_counter()
    measured([*floor_command(up.url, "raw"), "--record", str(recording)], log)
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    replay = group.start(
        [sys.executable, "-m", "sandbox.replay", "--recording", str(recording), "--port", str(port)]
    )
    try:
        wait_until_answering(url + "/healthz", replay, timeout_s=600)
        recorded_s = time.perf_counter() - started
        yield Replay(url, up.s3_url, up.scale, recorded_s, replay.pid, recording)
    finally:
        stop(replay)
        recording.unlink(missing_ok=True)


@dataclass(frozen=True)
class UpstreamCost:
    """What one run cost the upstream: requests, its CPU seconds meanwhile, and of a replay the
    requests it had no recorded answer for."""

    requests: int
    cpu_s: float
    misses: int = 0


def upstream_cost(up: UpstreamProcess, run: Any) -> tuple[Any, UpstreamCost]:
    """Run ``run()``; the upstream requests it made, the upstream's CPU time meanwhile and the
    replay's misses (0 from the sandbox)."""
    before, cpu = up.stats(), up.cpu_s()
    value = run()
    after = up.stats()
    return value, UpstreamCost(
        after["requests"] - before["requests"],
        up.cpu_s() - cpu,
        after.get("misses", 0) - before.get("misses", 0),
    )


# ----------------------------------------------------------------------------- the parts

UV = shutil.which("uv") or str(HERE.parent / ".tools" / "bin" / "uv")
# How users start ductwork (docs/commands.md: `uv run ductwork ...`; the Makefile's RUN):
# the launcher's own cost is part of what they wait for, and the start-up floor is started
# the same way, so it is in both sides of that ratio.
LAUNCH = [UV, "run", "--frozen"]
STARTUP_FLOOR = [*LAUNCH, "python", "-c", "import dagster, duckdb"]
# A reference beside them: a Dagster run of one asset that does nothing (``bench.noop_run``).
NOOP_RUN = [*LAUNCH, "python", "-m", "bench.noop_run"]
# The large scale's cost in the budget: its full syncs take about this many times the medium
# one, plus the sandbox's start-up and the serving mix (seconds).
LARGE_FACTOR = 6
LARGE_FIXED_S = 120
STEP_LINE = re.compile(r"^\s+ok\s+(\S+)\s.*\((\d+(?:\.\d+)?) s\)\s*$")
RUN_LINE = re.compile(r"^run \S+: success in (\d+(?:\.\d+)?) s")


@dataclass
class SyncRun:
    """One whole ``ductwork sync`` process: its wall time from outside, peak RSS, the
    upstream requests it made and each step's seconds from its own output; its CPU time and the
    upstream's meanwhile (the replay's for a full sync, the sandbox's otherwise), and the
    replay's misses."""

    seconds: float
    peak_rss: int
    requests: int
    home: Path
    steps: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    replay_misses: int = 0

    @property
    def publish_s(self) -> float:
        return self.steps.get("serving_snapshot", math.nan)


@dataclass
class Findings:
    """Everything measured, by part."""

    raw_floor: dict[str, list[float]] = field(default_factory=dict)
    aiohttp_floor: dict[str, list[float]] = field(default_factory=dict)
    # scale -> the land-and-model floor's seconds, per run, and each run's report (its parts'
    # seconds and CPU seconds, what it landed and modelled)
    land_floor: dict[str, list[float]] = field(default_factory=dict)
    land_floor_reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    floor_requests: dict[str, int] = field(default_factory=dict)
    # client ("raw", "aiohttp", "land") -> the floor process's CPU seconds, and the upstream's (the
    # replay's), per run
    floor_cpu: dict[str, list[float]] = field(default_factory=dict)
    floor_upstream_cpu: dict[str, list[float]] = field(default_factory=dict)
    # scale -> seconds from the start of recording the sandbox's answers to the replay answering
    replay_recording_s: dict[str, float] = field(default_factory=dict)
    # scale -> run ("raw floor", "aiohttp floor", "full sync") -> the replay's misses, per run:
    # requests it had no recorded answer for (404s the run was given instead of the sandbox's
    # answer). Any miss is also in ``notes``.
    replay_misses: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    full: dict[str, list[SyncRun]] = field(default_factory=dict)
    # scale -> the full sync against the sandbox itself, where the full syncs ran against the
    # replay: the data folder of the incremental runs, and the sync that the dlt peer and the
    # large scale (both against the sandbox) are compared with.
    sandbox_full: dict[str, SyncRun] = field(default_factory=dict)
    peer: dict[str, list[Measured]] = field(default_factory=dict)
    # scale -> ductwork's full sync against the sandbox run just before each dlt run, on a
    # fresh data folder: the two sides of the peer's ratio minutes apart, not a quarter hour.
    peer_ours: dict[str, list[SyncRun]] = field(default_factory=dict)
    peer_requests: dict[str, int] = field(default_factory=dict)
    startup_floor: list[float] = field(default_factory=list)
    startup_floor_rss: list[int] = field(default_factory=list)
    startup_floor_cpu: list[float] = field(default_factory=list)
    noop_run: list[float] = field(default_factory=list)
    noop_run_cpu: list[float] = field(default_factory=list)
    no_change: list[SyncRun] = field(default_factory=list)
    changed: list[SyncRun] = field(default_factory=list)
    mutation: dict[str, int] = field(default_factory=dict)
    # mix name -> server -> runs (wrk, closed loop, saturation)
    serving: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    serving_setup: dict[str, Any] = field(default_factory=dict)
    # The lookup mix paced at half ductwork's saturated rate (open loop), against ductwork and
    # against the ceiling at that same rate: "shared" cores or "pinned" (the ceiling's
    # prefixed "ceiling ").
    paced_rate: float = 0.0
    paced: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # "ductwork" or "ceiling" -> wrk's requests/s with the server pinned to core 0, wrk to 1
    pinned_saturation: dict[str, list[float]] = field(default_factory=dict)
    startup: dict[str, float] = field(default_factory=dict)
    # The mirror's memory (``bench.memory``): its syncs, sizes and serving figures.
    history: Any = None
    # ``ductwork forget`` of one lead on the memory part's data folder (``bench.forget``), or
    # the error that stopped it.
    forget: Any = None
    # Wall time of each part of the suite, for where its budget goes.
    part_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Suite:
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

    # ------------------------------------------------------------------------- serving

    def serving(self, group: ProcessGroup, home: Path, scale: str) -> None:
        """``ductwork serve`` as the CLI starts it against the ceiling, on this scale's mixes."""
        from bench.serving_mix import mixes_for

        key = create_key(home)
        ours_port = free_socket().getsockname()[1]
        ours_url = f"http://127.0.0.1:{ours_port}"
        ours = group.start(
            [*LAUNCH, "ductwork", "serve", "--host", "127.0.0.1", "--port", str(ours_port)],
            env={**os.environ, "DUCTWORK_HOME": str(home), **SERVE_UNDER_LOAD},
        )
        wait_until_answering(ours_url + "/healthz", ours, timeout_s=300)
        mixes = mixes_for(scale, home, ours_url, key)
        answers: dict[str, dict[str, Any]] = {}
        for mix in mixes:
            answers.update(mix.ceiling_answers)
        from ductwork.settings import ServeSettings

        workers = ServeSettings().serve_workers
        bodies_file = self.work / f"ceiling-answers-{scale}.json"
        ceiling, ceiling_url = start_ceiling(group, answers, bodies_file, workers)
        self.found.serving_setup["workers"] = workers
        for mix in mixes:
            ours_file = self.work / "paths-ours.txt"
            ceiling_file = self.work / "paths-ceiling.txt"
            ours_file.write_text("\n".join(mix.ours) + "\n", encoding="utf-8")
            ceiling_file.write_text("\n".join(mix.ceiling) + "\n", encoding="utf-8")
            results: dict[str, list[dict[str, float]]] = {"ductwork": [], "ceiling": []}
            for _ in range(self.options.runs):
                ours_run = partial(self.wrk, ours_url, ours_file, key)
                results["ductwork"].append(with_server_cpu(ours.pid, ours_run))
                ceiling_run = partial(self.wrk, ceiling_url, ceiling_file, None)
                results["ceiling"].append(with_server_cpu(ceiling.pid, ceiling_run))
            self.found.serving[mix.name] = results
            self.found.serving_setup.setdefault("mixes", {})[mix.name] = mix.describe
            expected = self.found.serving_setup.setdefault("expected", {})
            expected[mix.name] = mix.expected_statuses()
            print(
                f"[serve] {mix.name}: ductwork {[round(r['rps']) for r in results['ductwork']]}, "
                f"ceiling {[round(r['rps']) for r in results['ceiling']]}",
                flush=True,
            )
            if mix.paced:
                self.paced(mix.name, Target(ours, ours_url, ours_file, key))
                # The same generator and rate against the ceiling: what the machine and the
                # generator themselves allow (no target; the ductwork rows carry it).
                self.paced(mix.name, Target(ceiling, ceiling_url, ceiling_file, None), "ceiling ")
                for server, target in (
                    ("ductwork", Target(ours, ours_url, ours_file, key)),
                    ("ceiling", Target(ceiling, ceiling_url, ceiling_file, None)),
                ):
                    self.found.pinned_saturation[server] = self.pinned_saturation(target)
        for child in (ours, ceiling):
            stop(child)

    def paced(self, name: str, target: Target, label: str = "") -> None:
        """The mix at half ductwork's median saturated rate, open loop, with the load generator
        sharing both cores with the server, then pinned: generator on core 1, server on 0."""
        rate = 0.5 * statistics.median(r["rps"] for r in self.found.serving[name]["ductwork"])
        self.found.paced_rate = rate
        command = [sys.executable, "-m", "bench.open_loop", "--url", target.url, "--paths",
                   str(target.paths), "--rate", f"{rate:.0f}", "--seconds",
                   str(self.options.serve_seconds), "--connections",
                   str(self.options.wrk_connections)]  # fmt: skip
        if target.key is not None:
            command += ["--key", target.key]
        server = process_tree(target.process.pid)
        for _ in range(self.options.runs):
            for way in ("shared", "pinned"):
                pin(server, "0,1" if way == "shared" else "0")
                prefix = ["taskset", "-c", "1"] if way == "pinned" else []
                out = subprocess.run([*prefix, *command], capture_output=True, text=True,
                                     check=True, cwd=ROOT).stdout  # fmt: skip
                result = json.loads(out.strip().splitlines()[-1])
                self.found.paced.setdefault(label + way, []).append(result)
                print(
                    f"[serve] {label}paced {rate:.0f}/s ({way}): {result['rps']:.0f}/s, "
                    f"p99 {result['p99_ms']:.1f} ms, statuses {result['statuses']}",
                    flush=True,
                )
        pin(server, "0,1")

    def pinned_saturation(self, target: Target) -> list[float]:
        """Requests/s at saturation with the server on core 0 and ``wrk`` on core 1: the most
        the server answers on the one core the paced runs pinned apart leave it."""
        server = process_tree(target.process.pid)
        rates = []
        try:
            pin(server, "0")
            for _ in range(self.options.runs):
                rates.append(self.wrk(target.url, target.paths, target.key, cores="1")["rps"])
        finally:
            pin(server, "0,1")
        print(f"[serve] pinned saturation {[round(r) for r in rates]}", flush=True)
        return rates

    def wrk(
        self, url: str, paths_file: Path, key: str | None, cores: str | None = None
    ) -> dict[str, float]:
        """One closed-loop ``wrk`` run at saturation over the requests in ``paths_file`` (on
        ``cores`` only, when given)."""
        options = self.options
        result = run_wrk(url, paths_file, key, options, cores)
        if result["socket_errors"]:
            self.found.notes.append(f"wrk on {url}: {result['socket_errors']} socket errors")
        return result


def start_ceiling(
    group: ProcessGroup, answers: dict[str, dict[str, Any]], bodies_file: Path, workers: int
) -> tuple[subprocess.Popen, str]:
    """The ceiling (``bench.ceiling_app``) answering ``answers`` (written to ``bodies_file``)
    with ``workers`` uvicorn workers on uvloop and httptools, as ``ductwork serve`` runs;
    started, answering, and its URL."""
    bodies_file.write_text(json.dumps(answers), encoding="utf-8")
    port = free_socket().getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", "bench.ceiling_app:app", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--loop", "uvloop", "--http",
               "httptools", "--log-level", "warning"]  # fmt: skip
    ceiling = group.start(command, env={**os.environ, "BENCH_CEILING_BODIES": str(bodies_file)})
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(f"{url}/{next(iter(answers))}/0", ceiling, timeout_s=120)
    return ceiling, url


def run_wrk(
    url: str, paths_file: Path, key: str | None, options: argparse.Namespace, cores: str | None
) -> dict[str, Any]:
    """One closed-loop ``wrk`` run at saturation over the requests in ``paths_file``, with the
    threads, connections and seconds of ``options`` (on ``cores`` only, when given): the
    figures ``bench/paths.lua`` prints."""
    pinned = ["taskset", "-c", cores] if cores else []
    command = [*pinned, "wrk", f"-t{options.wrk_threads}", f"-c{options.wrk_connections}",
               f"-d{options.serve_seconds}s", "--latency", "-s", str(HERE / "paths.lua"),
               url, "--", str(paths_file), key or "-"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("BENCH_JSON "))
    return json.loads(line.removeprefix("BENCH_JSON "))


def with_server_cpu(pid: int, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A load run's result, with ``server_cpu_s``: the CPU time (user + system) the server
    ``pid`` and its descendants (its workers) spent during it. A process that ended meanwhile
    is left out of the sum."""
    pids = process_tree(pid)
    before = {p: process_cpu_s(p) for p in pids}
    result = run()
    spent = 0.0
    for p, start in before.items():
        end = process_cpu_s(p)
        if start is not None and end is not None:
            spent += end - start
    return {**result, "server_cpu_s": spent}


def create_key(home: Path) -> str:
    """A read API key with every scope, in ``home``'s key file."""
    from ductwork.keys import KeyFile
    from ductwork.settings import HomeSettings

    return KeyFile(HomeSettings(home=home).keys_path).create("bench", ["all"])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``ductwork serve`` under ``uv run``: uvicorn's workers),
    from each process's parent in ``/proc/*/stat``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        if (fields := proc_stat(int(entry.name))) is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found = [pid]
    for parent in found:
        found += parents.get(parent, [])
    return found


def pin(pids: list[int], cores: str) -> None:
    """Every thread of ``pids`` onto ``cores`` (``taskset -a``)."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-pc", cores, str(pid)], capture_output=True, check=False)


def stop(child: subprocess.Popen) -> None:
    """SIGTERM a child's whole session (uvicorn's workers too) and wait for it."""
    with suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def ensure_wrk() -> None:
    """Install Debian's wrk when it is missing (the load generator of the serving part)."""
    if shutil.which("wrk"):
        return
    print("installing wrk (apt-get install wrk)", flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=True)


# ----------------------------------------------------------------------------- main


def prepare_this_process() -> None:
    """Signals, the children's environment and wrk, before any part starts."""
    # SIGTERM unwinds like Ctrl-C, so the servers and children started below are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    prepare_children_environment()
    ensure_wrk()


def prepare_children_environment() -> None:
    """What every child the bench starts inherits: moto's credentials, and ``uv run``
    launching as a user's does."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    # A user's `uv run` does not recompile the environment's bytecode on every launch; with
    # this set (as `make` once exported it), each launch spent about half a second doing so,
    # in the syncs and the start-up floor alike.
    os.environ.pop("UV_COMPILE_BYTECODE", None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--runs", type=int, default=3, help="repeats of each figure at the first scale (median)"
    )
    parser.add_argument("--large-runs", type=int, default=1, help="full syncs at large")
    parser.add_argument("--dlt-runs", type=int, default=3, help="dlt peer runs at the first scale")
    parser.add_argument("--scales", nargs="+", default=["medium", "large"])
    parser.add_argument("--serve-seconds", type=int, default=3, help="length of each load run")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--wrk-connections", type=int, default=32)
    parser.add_argument(
        "--budget-min", type=float, default=25, help="shorten dlt's repeats to stay within it"
    )
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument(
        "--memory-syncs", type=int, default=30, help="syncs after 1 %% changed, for the history"
    )
    parser.add_argument(
        "--parts",
        choices=("all", "serving"),
        default="all",
        help="serving: only the serving part, after one full sync per scale",
    )
    parser.add_argument(
        "--home",
        action="append",
        default=[],
        metavar="SCALE=DIR",
        help="with --parts serving: serve this synced data folder at SCALE instead of syncing",
    )
    options = parser.parse_args()
    from bench.forget import measure_or_failure as measure_forget  # both import this module
    from bench.memory import measure as measure_memory

    if options.parts == "serving":
        return serving_only(options)
    os.chdir(ROOT)  # `uv run` finds the project from the working directory
    prepare_this_process()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ductwork-bench-") as work, ProcessGroup() as group:
        suite = Suite(options, Path(work))
        s3_url = start_object_store(group)
        for scale in options.scales:
            first = scale == options.scales[0]
            with upstream(scale, group, s3_url) as up:
                suite.found.startup[scale] = up.startup_s
                print(f"[{scale}] sandbox up in {up.startup_s:.0f}s", flush=True)
                if first:
                    last = suite.replayed_and_sandbox_syncs(up, group)
                else:
                    # One full sync, for its memory and publish time beside the sandbox sync
                    # of the first scale: no floors here, so no replay either.
                    last = suite.full_vs_floors(up, options.large_runs, floors=False)
                if first:
                    # ductwork's own runs before the peer, which empties the file cache.
                    with suite.part(f"start-up floor and incremental runs ({scale})"):
                        suite.incremental(up, last.home)
                    with suite.part(f"the mirror's memory ({scale})"):
                        suite.found.history = measure_memory(
                            up, group, last.home, suite.work, options.memory_syncs, 200
                        )
                    with suite.part(f"forgetting a person ({scale})"):
                        suite.found.forget = measure_forget(up, last.home, suite.work)
                with suite.part(f"serving ({scale})"):
                    suite.serving(group, last.home, scale)
                if first:
                    suite.peer_runs(up, started)
            # What is measured so far is written at once: a long run stopped later keeps it.
            write_results(suite.found, options, started, done=scale == options.scales[-1])
    return 0


def serving_only(options: argparse.Namespace) -> int:
    """The serving part alone at each scale, on a data folder given by ``--home`` or synced
    once from the sandbox; prints its figures (``bench/RESULTS.md`` is left as it is)."""
    homes = dict(entry.split("=", 1) for entry in options.home)
    os.chdir(ROOT)
    prepare_this_process()
    with tempfile.TemporaryDirectory(prefix="ductwork-bench-") as work, ProcessGroup() as group:
        suite = Suite(options, Path(work))
        s3_url = ""
        for scale in options.scales:
            if scale in homes:
                suite.serving(group, Path(homes[scale]), scale)
                continue
            if not s3_url:
                s3_url = start_object_store(group)
            with upstream(scale, group, s3_url) as up:
                home = suite.sync(up, suite.new_home()).home
            suite.serving(group, home, scale)
        print_serving_verdicts(suite.found)
    return 0


def print_serving_verdicts(found: Findings) -> None:
    """Each serving figure with its target, met or missed (the ceiling's paced runs have none)."""
    from bench.results import (
        PACED_P99_RATIO_TARGET,
        cpu_per_answer_us,
        paced_p99_ratio,
        serving_share_target,
    )

    for name, results in found.serving.items():
        ours, ceiling = (statistics.median(r["rps"] for r in results[s])
                         for s in ("ductwork", "ceiling"))  # fmt: skip
        target = serving_share_target(name)
        word = "met" if ours / ceiling >= target else "missed"
        print(f"[serve] {name}: ductwork / ceiling = {ours / ceiling:.0%} "
              f"(target ≥ {target:.0%}: {word})", flush=True)  # fmt: skip
        ours_cpu, ceiling_cpu = (cpu_per_answer_us(results[s]) for s in ("ductwork", "ceiling"))
        if ours_cpu is not None and ceiling_cpu is not None:
            print(f"[serve] {name}: server CPU per answer, ductwork {ours_cpu:.1f} µs, ceiling "
                  f"{ceiling_cpu:.1f} µs (no target)", flush=True)  # fmt: skip
    for way, runs in found.paced.items():
        p99 = statistics.median(r["p99_ms"] for r in runs)
        print(f"[serve] paced ({way}): p99 {p99:.1f} ms", flush=True)
    ratio = paced_p99_ratio(found)
    if ratio is not None:
        word = "met" if ratio <= PACED_P99_RATIO_TARGET else "missed"
        print(f"[serve] paced p99 ductwork / ceiling (cores shared) = {ratio:.2f} "
              f"(target ≤ {PACED_P99_RATIO_TARGET}: {word})", flush=True)  # fmt: skip


def start_object_store(group: ProcessGroup) -> str:
    """moto's S3 server with the bench bucket and its manuals; its URL."""
    s3_port = free_socket().getsockname()[1]
    s3_url = f"http://127.0.0.1:{s3_port}"
    command = ["sh", "-c", 'exec "$0" "$@" >/dev/null 2>&1', installed_command("moto_server"),
               "-H", "127.0.0.1", "-p", str(s3_port)]  # fmt: skip
    wait_until_answering(s3_url, group.start(command))
    from assets.resources import ObjectStore
    from sandbox.server import seed_bucket

    s3 = ObjectStore(bucket=BUCKET, endpoint_url=s3_url).client()
    s3.create_bucket(Bucket=BUCKET)
    seed_bucket(s3, BUCKET, 1, 40)
    return s3_url


def write_results(found: Findings, options: argparse.Namespace, started: float, done: bool) -> None:
    """Render ``bench/RESULTS.md`` from what has been measured."""
    from bench.results import render

    total = time.perf_counter() - started
    args = " ".join(sys.argv[1:])
    command = f"make bench BENCH_ARGS='{args}'" if args else "make bench"
    command += f"` (that is, `uv run --frozen --group bench python -m bench.suite {args}".rstrip()
    command += "`)"
    text = render(found, options, total, command.strip())
    if not done:
        text = text.replace("## Summary", "**Partial: the suite was still running.**\n\n## Summary")
    options.out.write_text(text, encoding="utf-8")
    if done:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
