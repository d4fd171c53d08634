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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.findings import Findings
from bench.forget import measure_or_failure as measure_forget
from bench.launching import HERE, ROOT, prepare_this_process
from bench.memory import measure as measure_memory
from bench.results import render
from bench.results.targets import (
    PACED_P99_RATIO_TARGET,
    cpu_per_answer_us,
    paced_p99_ratio,
    serving_share_target,
)
from bench.serving_part import ServingPart
from bench.sync_parts import SyncParts
from bench.upstreams import Upstream, start_object_store, upstream
from pipelines.processes import ProcessGroup


class Suite(SyncParts, ServingPart):
    """Every part of the suite, on one work folder and one set of findings."""


def parse_options() -> argparse.Namespace:
    """The suite's command line."""
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
    return parser.parse_args()


def main() -> int:
    """Run every part at every scale, writing ``bench/RESULTS.md`` after each scale."""
    options = parse_options()
    if options.parts == "serving":
        return serving_only(options)
    os.chdir(ROOT)  # `uv run` finds the project from the working directory
    prepare_this_process()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ductwork-bench-") as work, ProcessGroup() as group:
        suite = Suite(options, Path(work))
        s3_url = start_object_store(group)
        for scale in options.scales:
            with upstream(scale, group, s3_url) as up:
                suite.found.startup[scale] = up.startup_s
                print(f"[{scale}] sandbox up in {up.startup_s:.0f}s", flush=True)
                if scale == options.scales[0]:
                    measure_first_scale(suite, up, group, started)
                else:
                    measure_later_scale(suite, up, group)
            # What is measured so far is written at once: a long run stopped later keeps it.
            write_results(suite.found, options, started, done=scale == options.scales[-1])
    return 0


def measure_first_scale(suite: Suite, up: Upstream, group: ProcessGroup, started: float) -> None:
    """Every part at the first scale: the floors and full syncs, then, on the last sync's data
    folder, the incremental runs, the mirror's memory, forgetting a person and serving; the dlt
    peer last."""
    scale = up.scale
    last = suite.replayed_and_sandbox_syncs(up, group)
    # ductwork's own runs before the peer, which empties the file cache.
    with suite.part(f"start-up floor and incremental runs ({scale})"):
        suite.incremental(up, last.home)
    with suite.part(f"the mirror's memory ({scale})"):
        suite.found.history = measure_memory(
            up, group, last.home, suite.work, suite.options.memory_syncs, 200
        )
    with suite.part(f"forgetting a person ({scale})"):
        suite.found.forget = measure_forget(up, last.home, suite.work)
    with suite.part(f"serving ({scale})"):
        suite.serving(group, last.home, scale)
    suite.peer_runs(up, started)


def measure_later_scale(suite: Suite, up: Upstream, group: ProcessGroup) -> None:
    """A later scale: one full sync, for its memory and publish time beside the sandbox sync
    of the first scale (no floors here, so no replay either), then serving."""
    last = suite.full_vs_floors(up, suite.options.large_runs, floors=False)
    with suite.part(f"serving ({up.scale})"):
        suite.serving(group, last.home, up.scale)


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


def write_results(found: Findings, options: argparse.Namespace, started: float, done: bool) -> None:
    """Render ``bench/RESULTS.md`` from what has been measured."""
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
