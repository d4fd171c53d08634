"""``bench/RESULTS.md`` from the suite's findings: a table per figure, each with every run, the
median, the ratio, the target and whether it is met. Nothing but what the run measured."""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.land_floor import LAND_FLOOR_LABEL, LAND_FLOOR_PARTS, floor_summary
from bench.suite import GIB, MIB, Findings, SyncRun

BUDGET_MIN = 25


def _steps_slowest_first(runs: Sequence[SyncRun], also: Sequence[SyncRun] = ()) -> list[str]:
    """The names of the steps the runs (and the runs ``also``) reported, by their median
    seconds in ``runs``, slowest first."""
    names = {name for run in [*runs, *also] for name in run.steps}
    return sorted(names, key=lambda name: -_median(run.steps.get(name, 0) for run in runs))


def _generator_share(runs: list[dict[str, float]]) -> str:
    """The median share of its wall time the paced generator spent on a CPU (``-`` for runs
    that did not report it)."""
    shares = [r["cpu_s"] / r["wall_s"] for r in runs if r.get("cpu_s") and r.get("wall_s")]
    return f"{_median(shares):.0%}" if shares else "-"


# What the serving tables show of each server's answers, summed over its runs.
ANSWER_COLUMNS = ("unexpected answers", "requests lost")


def _answer_counts(runs: Sequence[Mapping[str, Any]], expected: Mapping[str, float]) -> list[str]:
    """The two answer columns of a server's row: answers the mix did not ask for, requests
    that got no answer (each summed over the runs)."""
    unexpected = sum(unexpected_answers(r.get("statuses") or {}, expected) for r in runs)
    lost = sum(lost_requests(r) for r in runs)
    return [f"{unexpected:,}", f"{lost:,}"]


def _missed(runs: Sequence[int] | None) -> str:
    """The replay misses of a kind of run, summed over its runs (a dash when not measured)."""
    return "–" if runs is None else f"{sum(runs):,}"


def _median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _runs(values: Sequence[float], fmt: str, width: int) -> list[str]:
    cells = [format(v, fmt) for v in values]
    return cells + ["–"] * (width - len(cells))


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


# The sync's targets: wall and CPU against the raw floor's (the least a client fetching the
# same requests spends), the upstream's CPU during that floor against the floor client's, peak
# memory, the no-change run against a no-op Dagster run, the run after 1 % changed against the
# no-change one, dlt against ductwork. The aiohttp floor stays a row of the tables, unjudged:
# a target set against it hid most of the sync's own cost (it is itself 3.5x the raw floor).
SYNC_WALL_TARGET = 2.0
SYNC_CPU_TARGET = 2.5
UPSTREAM_CPU_TARGET = 0.33
PEAK_RSS_TARGET_MIB = 350
LARGE_RSS_TARGET = 1.1
NO_CHANGE_TARGET = 1.25
CHANGED_SHARE_OF_FULL = 0.05
DLT_WALL_TARGET = 12.0
# Serving targets: the lookup mix's p99 paced at half ductwork's saturated rate against the
# ceiling's at that rate (cores shared), and ductwork's share of the ceiling's rate per mix.
PACED_P99_RATIO_TARGET = 1.5


# The floors' names in the CPU table, by the client the suite names them with.
FLOOR_NAMES = {"raw": "floor: raw", "aiohttp": "floor: aiohttp", "land": "land-and-model floor"}


def serving_share_target(mix: str) -> float:
    """The least share of the ceiling's rate ductwork must reach on the mix named ``mix``."""
    return 0.67 if mix.startswith("SKU") else 0.25


# A serving target is missed when a run lost more than this share of its requests...
LOSS_LIMIT = 0.001
# ...or when any answer's status is one the mix does not expect, or an expected status comes
# more often than its share of the mix by more than this share of the answers (the requests go
# round robin from a random start per thread, so the shares hold to well within it).
SHARE_SLACK = 0.01


def fetched_as_floor(found: Findings, scale: str) -> bool:
    """Whether the full syncs fetched what the floors fetched: no replay miss in any run of the
    floors or the syncs, and every sync's request count the floor's. Otherwise the floors are
    no reference, and every verdict against them is missed."""
    misses = found.replay_misses.get(scale, {})
    if any(sum(runs) for runs in misses.values()):
        return False
    counts = {run.requests for run in found.full.get(scale, [])}
    return counts == {found.floor_requests.get(scale)}


def paced_p99_ratio(found: Findings) -> float | None:
    """The paced lookup mix's median p99 over the ceiling's at the same rate, cores shared
    (None until both were measured)."""
    ours, ceiling = found.paced.get("shared"), found.paced.get("ceiling shared")
    if not (ours and ceiling):
        return None
    return _median(r["p99_ms"] for r in ours) / _median(r["p99_ms"] for r in ceiling)


def unexpected_answers(statuses: Mapping[str, int], expected: Mapping[str, float]) -> int:
    """How many answers the mix did not ask for: every answer with a status it never expects,
    and those of an expected status beyond its share (and the slack)."""
    total = sum(statuses.values())
    extra = 0
    for status, count in statuses.items():
        share = expected.get(status)
        allowed = 0 if share is None else math.floor((share + SHARE_SLACK) * total)
        extra += max(0, count - allowed)
    return extra


def answers_held(run: Mapping[str, Any], expected: Mapping[str, float]) -> bool:
    """Whether a load run's answers allow a verdict on its figures: no unexpected status, and
    no more than LOSS_LIMIT of its requests lost (wrk's socket errors, or the open-loop
    generator's requests left unanswered)."""
    statuses = run.get("statuses") or {}
    if not statuses:
        return False  # a run that counted no answer proves nothing
    answered = sum(statuses.values())
    lost = lost_requests(run)
    return unexpected_answers(statuses, expected) == 0 and lost <= LOSS_LIMIT * (answered + lost)


# ductwork's bytes per answer against the ceiling's (which repeats copies of its answers) in a
# mix: below this share, ductwork answered something smaller than what the ceiling copies.
BYTES_SHARE = 0.95


def answer_bytes(runs: Sequence[Mapping[str, Any]]) -> float | None:
    """The median of the runs' bytes read per answer (wrk's count, heads included); None when
    the runs did not count bytes."""
    sizes = [r["bytes"] / r["requests"] for r in runs if r.get("bytes") and r.get("requests")]
    return statistics.median(sizes) if sizes else None


def cpu_per_answer_runs(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each run's server CPU per answer in microseconds (``server_cpu_s`` over wrk's requests),
    for the runs that measured the server's CPU."""
    return [
        r["server_cpu_s"] / r["requests"] * 1e6
        for r in runs
        if r.get("server_cpu_s") is not None and r.get("requests")
    ]


def cpu_per_answer_us(runs: Sequence[Mapping[str, Any]]) -> float | None:
    """The median of the runs' server CPU per answer in microseconds; None when the runs did
    not measure the server's CPU."""
    spent = cpu_per_answer_runs(runs)
    return statistics.median(spent) if spent else None


def _cpu_per_answer_lines(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """The line saying what an answer costs each server in CPU (none when not measured)."""
    ours, ceiling = (cpu_per_answer_us(results[server]) for server in ("ductwork", "ceiling"))
    if ours is None or ceiling is None:
        return []
    runs = {
        server: ", ".join(f"{us:.1f}" for us in cpu_per_answer_runs(results[server]))
        for server in ("ductwork", "ceiling")
    }
    return [
        f"Server CPU per answer (user + system of the server's processes during each run, over "
        f"the requests answered): ductwork {ours:.1f} µs (runs: {runs['ductwork']}), ceiling "
        f"{ceiling:.1f} µs (runs: {runs['ceiling']}), medians; ductwork / ceiling = "
        f"**{ours / ceiling:.2f}** (a row, no target). Unlike requests/s, it leaves out how the "
        "two cores happened to be shared with `wrk`: what an answer costs each server.",
        "",
    ]


def lost_requests(run: Mapping[str, Any]) -> int:
    """The requests of a load run that got no answer."""
    return int(run.get("socket_errors", 0)) + int(run.get("unanswered", 0))


class Report:
    def history(self) -> None:
        """The mirror's memory (``bench.memory``): its figures in the summary, its section."""
        found = self.found.history
        if found is None:
            return
        from bench.memory import FIGURES, TARGETS, report

        ratios = found.ratios()
        for name, label in FIGURES.items():
            self.verdict(
                f"{label} ({found.scale})",
                f"{ratios[name]:.2f}",
                f"≤ {TARGETS[name]:g}",
                ratios[name] <= TARGETS[name],
            )
        self.body += [*report(found), ""]

    def forget(self) -> None:
        """``ductwork forget`` of one lead (``bench.forget``): its summary row and section."""
        found = self.found.forget
        if found is None:
            return
        from bench.forget import report

        lines, (figure, value, target, ok) = report(found, self.first)
        self.verdict(figure, value, target, ok)
        self.body += ["### Forgetting a person", "", *lines]

    def __init__(self, found: Findings, options: argparse.Namespace) -> None:
        self.found = found
        self.options = options
        self.width = max(options.runs, options.large_runs, options.dlt_runs, 1)
        self.first = next(iter(found.full), "medium")
        self.summary: list[list[object]] = []
        self.body: list[str] = []

    def run_header(self, first: str) -> list[str]:
        return [first, *(f"run {i + 1}" for i in range(self.width)), "median"]

    def row(self, label: str, values: Sequence[float], fmt: str = ".2f") -> list[str]:
        return [label, *_runs(values, fmt, self.width), format(_median(values), fmt)]

    def verdict(self, figure: str, value: str, target: str, ok: bool) -> str:
        """Add ``figure`` to the summary; its met/missed word for the body."""
        self.summary.append([figure, value, target, _met(ok)])
        return _met(ok)

    def full_s(self, scale: str | None = None) -> float:
        return _median(r.seconds for r in self.found.full.get(scale or self.first, []))

    # 1 -------------------------------------------------------------------------------------
    def floors(self) -> None:
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
        own = _median(full) / _median(tight)
        physical = _median(full) / _median(raw)
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
        self.body += _table([*self.run_header("run"), "upstream requests", "replay misses"], rows)
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
        self.body += _table(self.run_header("run"), rows)
        self.cpu_verdicts(scale)
        raw = found.raw_floor.get(scale)
        if raw:
            bound = _median(bounds)
            self.body += [
                "The last row is the least a sync doing the same CPU work could take, had it "
                f"kept every core busy from start to end: {bound:.1f} s, "
                f"{bound / _median(raw):.2f} × the raw floor's median. No overlap brings "
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
        cpu = _median(r.cpu_s for r in found.full[scale]) / _median(client_cpu)
        a = self.verdict(
            f"full sync CPU / raw floor CPU ({scale})", f"{cpu:.2f}",
            f"≤ {SYNC_CPU_TARGET:g}", faithful and cpu <= SYNC_CPU_TARGET,
        )  # fmt: skip
        upstream = _median(found.floor_upstream_cpu.get("raw", [])) / _median(client_cpu)
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
        names = _steps_slowest_first(full)
        step_rows = [
            self.row(name, [run.steps.get(name, math.nan) for run in full], ".1f") for name in names
        ]
        self.body += ["Steps of the same full syncs, as `ductwork sync` reports them (s):", ""]
        self.body += _table(self.run_header("step"), step_rows)

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
        self.body += _table(self.run_header("part"), rows)
        dagster = None
        if found.noop_run_cpu and found.startup_floor_cpu:
            dagster = _median(found.noop_run_cpu) - _median(found.startup_floor_cpu)
        line = floor_summary(
            _median(land_cpu),
            _median(raw_cpu),
            _median(land_wall) / _median(raw_wall),
            dagster,
            SYNC_CPU_TARGET,
        )
        self.body += [line, ""]

    # 2 -------------------------------------------------------------------------------------
    def memory(self) -> None:
        full = self.found.full
        self.body += [
            "### 2. Peak RSS of a full sync (`wait4` rusage of the `uv run` process, which "
            "counts the descendants it waited for)",
            "",
        ]
        sandbox = self.found.sandbox_full
        rows = [
            self.row(
                f"{scale}{' (replay)' if scale in sandbox else ''}, MiB",
                [r.peak_rss / MIB for r in runs], ".0f",
            )
            for scale, runs in full.items()
        ]  # fmt: skip
        rows += [self.row(f"{scale} (sandbox), MiB", [run.peak_rss / MIB], ".0f")
                 for scale, run in sandbox.items()]  # fmt: skip
        self.body += _table(self.run_header("scale"), rows)
        first = _median(r.peak_rss for r in full.get(self.first, []))
        if first == first:  # not NaN
            self.verdict(
                f"peak RSS, full sync ({self.first})",
                f"{first / MIB:.0f} MiB",
                f"≤ {PEAK_RSS_TARGET_MIB} MiB",
                first <= PEAK_RSS_TARGET_MIB * MIB,
            )
        if "large" in full and self.first != "large":
            large = _median(r.peak_rss for r in full["large"])
            # Large syncs against the sandbox: compared with the first scale's sandbox sync.
            base = sandbox[self.first].peak_rss if self.first in sandbox else first
            ratio = large / base
            word = self.verdict(
                f"peak RSS large / {self.first}", f"{ratio:.2f}", f"≤ {LARGE_RSS_TARGET}",
                ratio <= LARGE_RSS_TARGET,
            )  # fmt: skip
            self.body += [
                f"large / {self.first} (both against the sandbox) = **{ratio:.2f}** "
                f"(target ≤ {LARGE_RSS_TARGET}): {word}.",
                "",
            ]

    # 3 -------------------------------------------------------------------------------------
    def incremental(self) -> None:
        found = self.found
        if not found.no_change:
            return
        # The incremental runs fetch from the sandbox: their share is of its full sync.
        base = found.sandbox_full.get(self.first)
        full = base.seconds if base is not None else self.full_s()
        startup = _median(found.startup_floor)
        noop = _median(found.noop_run)
        quiet = _median(r.seconds for r in found.no_change)
        changed = _median(r.seconds for r in found.changed)
        counts = ", ".join(f"{k} = {v:,}" for k, v in found.mutation.items())
        self.body += [
            f"### 3. Incremental `ductwork sync` runs, scale `{self.first}`",
            "",
            "Whole `uv run --frozen ductwork sync` processes on the last full sync's data folder "
            "(its instance on disk), against the sandbox. The no-op Dagster run "
            "(`bench.noop_run`) is a run of one asset that does nothing, on an instance set up "
            "as the sync's in a folder of its own, started the same way: what any Dagster run "
            "costs before ductwork's own work. The start-up floor (a reference) is `uv run "
            "--frozen python -c 'import dagster, duckdb'`, each run just before a no-change "
            "run. Each changed run "
            f"follows one `POST /_sandbox/mutate` of {counts} (1 % of assets and of leads).",
            "",
        ]
        rows = [
            [*self.row("start-up floor (reference), s", found.startup_floor), "–"],
            [*self.row("no-op Dagster run, s", found.noop_run), "0"],
            [*self.row("no change, s", [r.seconds for r in found.no_change]),
             f"{found.no_change[-1].requests:,}"],
            [*self.row("after 1 % changed, s", [r.seconds for r in found.changed]),
             f"{found.changed[-1].requests:,}" if found.changed else "–"],
        ]  # fmt: skip
        self.body += _table([*self.run_header("run"), "upstream requests"], rows)
        ratio = quiet / noop
        share = CHANGED_SHARE_OF_FULL
        bound = quiet + share * full
        a = self.verdict(
            "no-change sync / no-op Dagster run", f"{ratio:.2f}", f"≤ {NO_CHANGE_TARGET}",
            ratio <= NO_CHANGE_TARGET,
        )  # fmt: skip
        b = self.verdict(
            "sync after 1 % changed",
            f"{changed:.2f} s",
            f"≤ no-change + {share:.0%} of full = {bound:.2f} s",
            changed <= bound,
        )
        self.body += [
            f"no change / no-op Dagster run = **{ratio:.2f}** (target ≤ {NO_CHANGE_TARGET}: "
            f"{a}); no change / start-up floor = {quiet / startup:.2f} (no target: issue 45 "
            "measures against the no-op run instead). After 1 % "
            f"changed: **{changed:.2f} s** against {quiet:.2f} s + {share:.0%} of the full "
            f"sync's {full:.1f} s (against the sandbox) = {bound:.2f} s: {b}.",
            "",
        ]
        self.steps(found.no_change, found.changed)

    def steps(self, quiet: list[SyncRun], changed: list[SyncRun]) -> None:
        """Every step either kind of run reported, slowest after a change first: the publish,
        which only a run with changes makes, included."""
        names = _steps_slowest_first(changed or quiet, also=quiet)
        if not names:
            return
        rows = [
            [
                name,
                f"{_median(r.steps.get(name, 0) for r in quiet):.2f}",
                f"{_median(r.steps.get(name, 0) for r in changed):.2f}",
            ]
            for name in names
        ]
        self.body += ["Steps as `ductwork sync` reports them (median, seconds):", ""]
        self.body += _table(["step", "no change", "after 1 % changed"], rows)

    # 4 -------------------------------------------------------------------------------------
    def peer(self) -> None:
        scale = self.first
        peer = self.found.peer.get(scale, [])
        # dlt fetches from the sandbox: it is compared with ductwork's syncs against the
        # sandbox run beside it (the sandbox full sync of section 1 for a run without them).
        base = self.found.sandbox_full.get(scale)
        ours = self.found.peer_ours.get(scale) or ([base] if base is not None else [])
        ours = ours or self.found.full.get(scale, [])
        if not ours:
            return
        self.body += [f"### 4. dlt `rest_api` peer vs `ductwork sync`, scale `{scale}`", ""]
        target = f"≥ {DLT_WALL_TARGET:g}"
        if not peer:
            self.body += ["dlt was not run (`--dlt-runs 0`): the dlt target missed.", ""]
            self.verdict(f"dlt / ductwork, wall ({scale})", "not run", target, False)
            return
        seconds = [m.report["seconds"] for m in peer]
        rss = [m.peak_rss / MIB for m in peer]
        rows = [self.row("dlt, s", seconds, ".1f"), self.row("dlt peak RSS, MiB", rss, ".0f")]
        for step in ("extract", "normalize", "load"):
            values = [m.report.get("steps", {}).get(step, float("nan")) for m in peer]
            rows.append(self.row(f"dlt {step}, s", values, ".1f"))
        rows += [
            self.row("`ductwork sync`, s", [r.seconds for r in ours], ".1f"),
            self.row("`ductwork sync` peak RSS, MiB", [r.peak_rss / MIB for r in ours], ".0f"),
        ]
        self.body += [
            "dlt tuned as its documentation allows: `parallelized: True` on every resource, 8 "
            "extract workers, `max_table_nesting=0`, Parquet load files (`bench/dlt_peer.py`). "
            "Both fetch from the sandbox itself (dlt's requests are not the sync's, so the "
            "replay has no answers for them); ductwork's rows are its full syncs against the "
            "sandbox, each on a fresh data folder just before a dlt run, so that the two sides "
            "of the ratio meet the machine as it is at that moment. "
            f"Upstream requests: dlt {self.found.peer_requests.get(scale, 0):,}, "
            f"ductwork {ours[-1].requests:,}.",
            "",
        ]
        self.body += _table(self.run_header("run"), rows)
        wall = _median(seconds) / _median(r.seconds for r in ours)
        memory = _median(m.peak_rss for m in peer) / _median(r.peak_rss for r in ours)
        a = self.verdict(
            f"dlt / ductwork, wall ({scale})", f"{wall:.2f}", target, wall >= DLT_WALL_TARGET
        )
        self.body += [
            f"dlt / ductwork: wall **{wall:.2f}** ({target}: {a}); peak RSS {memory:.2f} (no "
            "target: issue 45 dropped it, as a process that only imports dagster and duckdb "
            "already peaks above a tenth of dlt's peak).",
            "",
        ]
        if self.found.startup_floor_rss:
            floor = _median(self.found.startup_floor_rss) / MIB
            self.body += [
                f"For reference: the start-up floor of section 3 (a process that only imports "
                f"dagster and duckdb) peaks at {floor:.0f} MiB.",
                "",
            ]

    # 5 -------------------------------------------------------------------------------------
    def serving(self) -> None:
        found = self.found
        if not found.serving:
            return
        setup = found.serving_setup
        opts = self.options
        self.body += [
            "### 5. Serving: `ductwork serve` vs a bare Starlette ceiling",
            "",
            f"`uv run --frozen ductwork serve` with `DUCTWORK_LOG_LEVEL=warning` "
            f"({setup['workers']} workers, its default) against a Starlette app on uvicorn with "
            "as many workers, uvloop and httptools, answering each request of a mix with a "
            "fixed copy (status, encoding, body) of a real answer of the same kind. Saturation: "
            f"`wrk -t{opts.wrk_threads} -c{opts.wrk_connections} -d{opts.serve_seconds}s` with "
            "`bench/paths.lua` (a distinct request each time, round robin over the mix), "
            "sharing both cores with the servers.",
            "",
        ]
        for name, results in found.serving.items():
            expected = setup.get("expected", {}).get(name, {})
            rows = []
            for server in ("ductwork", "ceiling"):
                runs = results[server]
                rows.append(
                    [
                        *self.row(f"{server}, requests/s", [r["rps"] for r in runs], ",.0f"),
                        f"{_median(r['p50_ms'] for r in runs):.2f}",
                        f"{_median(r['p99_ms'] for r in runs):.2f}",
                        *_answer_counts(runs, expected),
                    ]
                )
            share = _median(r["rps"] for r in results["ductwork"]) / _median(
                r["rps"] for r in results["ceiling"]
            )
            sizes = {server: answer_bytes(results[server]) for server in ("ductwork", "ceiling")}
            full = sizes["ceiling"] is None or (
                sizes["ductwork"] is not None
                and sizes["ductwork"] >= BYTES_SHARE * sizes["ceiling"]
            )
            held = full and all(answers_held(r, expected) for r in results["ductwork"])
            target = serving_share_target(name)
            shares = ", ".join(f"{status}: {part:.0%}" for status, part in expected.items())
            self.body += [f"#### {name}", "", setup["mixes"][name] + f" (answers: {shares}).", ""]
            self.body += _table(
                [*self.run_header("server"), "p50 ms", "p99 ms", *ANSWER_COLUMNS], rows
            )
            if sizes["ductwork"] is not None and sizes["ceiling"] is not None:
                self.body += [
                    f"Bytes read per answer (head and body, median of the runs): ductwork "
                    f"{sizes['ductwork']:,.0f}, ceiling {sizes['ceiling']:,.0f}; ductwork's must "
                    f"be at least {BYTES_SHARE:.0%} of the ceiling's copies (its heads carry "
                    "more headers), or its answers are not the ones the ceiling copies.",
                    "",
                ]
            self.body += _cpu_per_answer_lines(results)
            value = f"{share:.0%}" if held else f"{share:.0%}, answers not as the mix asks"
            word = self.verdict(
                f"serving: {name} / ceiling", value, f"≥ {target:.0%}", held and share >= target
            )
            self.body += [f"ductwork / ceiling = **{share:.0%}** (≥ {target:.0%}: {word}).", ""]
            if name.startswith("SKU") and found.paced:
                self.paced()

    def paced(self) -> None:
        found = self.found
        rate = found.paced_rate
        lookups = next((name for name in found.serving if name.startswith("SKU")), "")
        expected = found.serving_setup.get("expected", {}).get(lookups, {})
        self.body += [
            f"The same mix paced at half ductwork's median saturated rate ({rate:,.0f} "
            "requests/s), by "
            "`bench/open_loop.py`: request *i* is due at *start + i / rate* whatever happened "
            "to those before it, and its latency runs from that due time, so waiting for a "
            "connection or behind a stalled answer counts (the coordinated-omission correction "
            f"plain `wrk` leaves out; {self.options.wrk_connections} keep-alive connections, "
            "taking turns). It sends what is due after each answer and otherwise sleeps until "
            "the next request is due, 1 ms at the least (uvloop's timers count whole "
            "milliseconds), so it never spins on a core the server needs; a request sent late "
            "still counts from its due time. Its own CPU share is the last column. "
            "Run with the generator sharing both cores with the server, then with the server's "
            "processes pinned to core 0 and the generator to core 1 (`taskset`), alternately. "
            "The ceiling rows are the same generator at the same rate against the ceiling: "
            "what the machine and the generator allow (the target is on ductwork's rows).",
            "",
        ]
        rows = []
        ways = (("shared", "cores shared"), ("pinned", "pinned apart"))
        for way, label in [*ways, *((f"ceiling {w}", f"ceiling, {t}") for w, t in ways)]:
            runs = found.paced.get(way, [])
            if not runs:
                continue
            rows.append(
                [
                    *self.row(f"{label}: p99 ms", [r["p99_ms"] for r in runs]),
                    f"{_median(r['rps'] for r in runs):,.0f}",
                    f"{_median(r['p50_ms'] for r in runs):.2f}",
                    _generator_share(runs),
                    *_answer_counts(runs, expected),
                ]
            )
        header = [*self.run_header("load"), "answered/s", "p50 ms", "generator CPU / wall",
                  *ANSWER_COLUMNS]  # fmt: skip
        self.body += _table(header, rows)
        saturation = found.pinned_saturation
        if saturation:
            self.body += [
                "For reference (no target), the most each server answers on the one core the "
                "runs pinned apart leave it: `wrk` at saturation on core 1, the server on core 0.",
                "",
            ]
            self.body += _table(
                self.run_header("server"),
                [
                    self.row(f"{name}, requests/s", rates, ",.0f")
                    for name, rates in saturation.items()
                ],
            )
            if "ductwork" in saturation:
                share = rate / _median(saturation["ductwork"])
                self.body += [
                    f"The paced rate is {share:.0%} of ductwork's rate on one core.",
                    "",
                ]
        ratio = paced_p99_ratio(found)
        if ratio is not None:
            held = all(answers_held(r, expected) for r in found.paced["shared"])
            word = self.verdict(
                "serving: lookup p99 at half ductwork's saturated rate / ceiling's p99 at that "
                "rate (cores shared)",
                f"{ratio:.2f}" if held else f"{ratio:.2f}, answers not as the mix asks",
                f"≤ {PACED_P99_RATIO_TARGET}",
                held and ratio <= PACED_P99_RATIO_TARGET,
            )
            self.body += [
                f"ductwork's p99 / the ceiling's at the same rate, cores shared = "
                f"**{ratio:.2f}** (target ≤ {PACED_P99_RATIO_TARGET}: {word}); the pinned rows "
                "are a reference.",
                "",
            ]

    # 6 -------------------------------------------------------------------------------------
    def publish(self) -> None:
        rows = [
            self.row(f"{scale}, s", [r.publish_s for r in runs], ".2f")
            for scale, runs in self.found.full.items()
        ]
        self.body += [
            "### 6. Snapshot publish (the `serving_snapshot` step, as the full sync reports it; "
            "no target)",
            "",
            *_table(self.run_header("scale"), rows),
        ]

    def budget(self, total_s: float) -> None:
        minutes = total_s / 60
        self.verdict(
            "`make bench` wall time", f"{minutes:.1f} min", f"≤ {BUDGET_MIN} min",
            minutes <= BUDGET_MIN,
        )  # fmt: skip
        startups = {f"sandbox start-up ({k})": v for k, v in self.found.startup.items()}
        parts = sorted({**self.found.part_s, **startups}.items(), key=lambda item: -item[1])
        rest = max(0.0, total_s - sum(seconds for _, seconds in parts))
        rows = [
            [name, f"{seconds / 60:.1f}", f"{seconds / total_s:.0%}"]
            for name, seconds in [*parts, ("everything else (object store, servers)", rest)]
        ]
        self.body += [
            "### The suite's own wall time",
            "",
            f"{minutes:.1f} min in all, against a budget of {BUDGET_MIN} min.",
            "",
            *_table(["part", "min", "share"], rows),
        ]


def render(found: Findings, options: argparse.Namespace, total_s: float, command: str) -> str:
    """The whole results file."""
    report = Report(found, options)
    report.floors()
    report.memory()
    report.history()
    report.forget()
    report.incremental()
    report.peer()
    report.serving()
    report.publish()
    report.budget(total_s)
    missed = sum(1 for row in report.summary if row[3] == _met(False))
    head: list[Any] = [
        "# Benchmark results",
        "",
        "Written by `bench/suite.py` from one run of it, against the sandbox upstream in its "
        "own process (the fetch floors and the full syncs of section 1 against its replay); "
        "every number below was measured by that run. Machines are noisy: "
        "compare ratios, not absolute numbers.",
        "",
        f"- Command: `{command}",
        f"- Machine: {os.cpu_count()} cores, {_mem_gib():.0f} GiB RAM, Python "
        f"{platform.python_version()}; run finished {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- Scales: {', '.join(options.scales)}; repeats: {options.runs} at "
        f"{options.scales[0]} (median), {options.large_runs} full sync(s) at large, "
        f"dlt {_dlt_runs(found)} of the {options.dlt_runs} asked (the budget decides; see "
        "the notes)",
        "",
        "## Summary",
        "",
        f"{len(report.summary) - missed} of {len(report.summary)} targets met.",
        "",
        *_table(["figure", "value", "target", "met"], report.summary),
        "## Figures",
        "",
    ]
    tail: list[str] = []
    if found.notes:
        tail += ["## Notes", "", *(f"- {note}" for note in found.notes), ""]
    return "\n".join(head + report.body + tail)


def _mem_gib() -> float:
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / GIB
    return 0.0


def _dlt_runs(found: Findings) -> int:
    """How many dlt runs the run made (at its first scale, the only one dlt runs at)."""
    return max((len(runs) for runs in found.peer.values()), default=0)
