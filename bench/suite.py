"""The benchmark suite of ``make bench``: every figure a ratio between runs made side by side.

Against the sandbox in its own process (and moto for the manuals), at scale medium then large:

1. full sync vs the fetch floor (``bench.fetch_floor``), interleaved, median of ``--runs``;
2. full sync vs the dlt ``rest_api`` peer (``bench.dlt_peer``);
3. incremental runs (no change; after 1 % of assets and leads changed) vs the full sync;
4. peak RSS of the sync at large vs medium (each sync in a child process; ``wait4`` rusage);
5. serving: ``ductwork serve`` (default workers) vs a bare Starlette app answering fixed bodies
   of the same size on the same uvicorn settings, loaded by ``wrk`` on loopback;
6. snapshot publish time (the ``serving_snapshot`` step) at medium and large.

Writes ``bench/RESULTS.md``. A part that cannot run here says so in its table.

    make bench   # = uv run --frozen --group bench python -m bench.suite
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx

from ductwork.contract.encoding import quote_sku
from ductwork.local_server import free_socket
from pipelines.processes import ProcessGroup, installed_command, wait_until_answering

KEY = "bench-key"
BUCKET = "ductwork-bench"
HERE = Path(__file__).resolve().parent
GIB = 1024**3
MIB = 1024**2


# ----------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    """One child process: its wall time, its peak RSS and the JSON it printed last."""

    seconds: float
    peak_rss: int
    report: dict[str, Any]


def measured(command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` to the end; peak RSS from ``wait4``'s rusage of that very child."""
    started = time.perf_counter()
    with open(log, "ab") as errors:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, env={**os.environ, **(env or {})}
        )
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise RuntimeError(f"{command[2]} failed ({child.returncode}); see {log}")
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    return Measured(seconds, usage.ru_maxrss * 1024, json.loads(lines[-1]) if lines else {})


@dataclass
class Upstream:
    """The sandbox (and moto) of one scale."""

    url: str
    s3_url: str
    scale: str
    startup_s: float

    def stats(self) -> dict[str, int]:
        headers = {"Authorization": f"Bearer {KEY}"}
        return httpx.get(f"{self.url}/_sandbox/stats", headers=headers, timeout=60).json()

    def mutate(self, counts: dict[str, int]) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        answer = httpx.post(
            f"{self.url}/_sandbox/mutate", json=counts, headers=headers, timeout=300
        )
        answer.raise_for_status()


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
        yield Upstream(url, s3_url, scale, time.perf_counter() - started)
    finally:
        stop(sandbox)


def requests_of(up: Upstream, run: Any) -> tuple[Any, int]:
    """Run ``run()`` and count the upstream requests it made."""
    before = up.stats()["requests"]
    value = run()
    return value, up.stats()["requests"] - before


# ----------------------------------------------------------------------------- the parts


@dataclass
class SyncRun:
    seconds: float
    peak_rss: int
    publish_s: float
    requests: int
    home: Path
    steps: dict[str, float] = field(default_factory=dict)


@dataclass
class Findings:
    """Everything measured, by part."""

    floor: dict[str, list[float]] = field(default_factory=dict)
    floor_requests: dict[str, int] = field(default_factory=dict)
    aiohttp_floor: dict[str, list[float]] = field(default_factory=dict)
    full: dict[str, list[SyncRun]] = field(default_factory=dict)
    peer: dict[str, list[Measured]] = field(default_factory=dict)
    peer_requests: dict[str, int] = field(default_factory=dict)
    peer_skipped: dict[str, str] = field(default_factory=dict)
    no_change: list[SyncRun] = field(default_factory=list)
    # The same no-change run as ``ductwork sync`` makes it: on the instance kept on disk.
    no_change_on_disk: list[SyncRun] = field(default_factory=list)
    changed: list[SyncRun] = field(default_factory=list)
    mutation: dict[str, int] = field(default_factory=dict)
    serving: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    serving_setup: dict[str, Any] = field(default_factory=dict)
    # SKU lookups paced at half the ceiling's rate: the rate the lookup target asks for.
    paced_rate: float = 0.0
    paced: list[dict[str, float]] = field(default_factory=list)
    startup: dict[str, float] = field(default_factory=dict)
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

    def sync(self, up: Upstream, home: Path, through_instance: bool = False) -> SyncRun:
        command = [
            sys.executable,
            "-m",
            "bench.sync_child",
            "--home",
            str(home),
            "--url",
            up.url,
            "--api-key",
            KEY,
            "--s3-url",
            up.s3_url,
            *(["--through-instance"] if through_instance else []),
        ]
        result, requests = requests_of(up, lambda: measured(command, self.log))
        report = result.report
        return SyncRun(
            report["seconds"],
            result.peak_rss,
            report["publish_s"] or math.nan,
            requests,
            home,
            report.get("steps", {}),
        )

    def floor(self, up: Upstream, client: str = "httpx") -> tuple[float, int]:
        command = [
            sys.executable,
            "-m",
            "bench.fetch_floor",
            "--url",
            up.url,
            "--api-key",
            KEY,
            "--client",
            client,
        ]
        result, requests = requests_of(up, lambda: measured(command, self.log))
        return result.report["seconds"], requests

    def peer(self, up: Upstream) -> tuple[Measured, int]:
        folder = self.work / f"peer-{up.scale}-{len(self.found.peer.get(up.scale, []))}"
        command = [
            sys.executable,
            "-m",
            "bench.dlt_peer",
            "--url",
            up.url,
            "--api-key",
            KEY,
            "--dir",
            str(folder),
        ]
        try:
            return requests_of(up, lambda: measured(command, self.log))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def full_vs_floor(self, up: Upstream) -> SyncRun:
        """Interleaved floor and full-sync runs; returns the last full sync (for later parts)."""
        scale = up.scale
        runs = self.options.runs if scale == self.options.scales[0] else self.options.large_runs
        self.found.floor[scale], self.found.full[scale] = [], []
        self.found.aiohttp_floor[scale] = []
        floors = self.options.floor_scales
        for index in range(runs):
            if scale in floors:
                with self.part(f"fetch floor on httpx ({scale})"):
                    seconds, requests = self.floor(up)
                self.found.floor[scale].append(seconds)
                self.found.floor_requests[scale] = requests
                print(f"[{scale}] floor {seconds:.1f}s", flush=True)
                # For information only, so it spends little of the suite's budget.
                if index < self.options.aiohttp_floor_runs:
                    with self.part(f"fetch floor on aiohttp ({scale})"):
                        tight, _ = self.floor(up, "aiohttp")
                    self.found.aiohttp_floor[scale].append(tight)
                    print(f"[{scale}] floor on aiohttp {tight:.1f}s", flush=True)
            with self.part(f"full syncs ({scale})"):
                run = self.sync(up, self.new_home())
            self.found.full[scale].append(run)
            print(
                f"[{scale}] full sync {run.seconds:.1f}s, {run.peak_rss / MIB:.0f} MiB", flush=True
            )
        for run in self.found.full[scale][:-1]:
            shutil.rmtree(run.home, ignore_errors=True)
        return self.found.full[scale][-1]

    def peer_runs(self, up: Upstream) -> None:
        scale = up.scale
        first = scale == self.options.scales[0]
        wanted = self.options.dlt_runs if first else self.options.dlt_large_runs
        if wanted == 0:
            self.found.peer_skipped[scale] = self.peer_skip_reason(scale)
            return
        for _ in range(wanted):
            with self.part(f"dlt peer ({scale})"):
                result, requests = self.peer(up)
            self.found.peer.setdefault(scale, []).append(result)
            self.found.peer_requests[scale] = requests
            print(
                f"[{scale}] dlt {result.report['seconds']:.1f}s, {result.peak_rss / GIB:.1f} GiB",
                flush=True,
            )

    def peer_skip_reason(self, scale: str) -> str:
        medium = self.found.peer.get("medium")
        if scale == "large" and medium:
            minutes = statistics.median(m.report["seconds"] for m in medium) / 60
            peak = statistics.median(m.peak_rss for m in medium) / GIB
            return (
                f"not run: dlt took {minutes:.1f} min at medium (peak {peak:.1f} GiB); large has "
                f"5x the assets and leads, so one run would take about {5 * minutes:.0f} min, "
                "beyond the suite's 20-minute budget (`--dlt-large-runs 1` runs it)"
            )
        return "not run (--dlt-runs 0)"

    def incremental(self, up: Upstream, home: Path) -> None:
        runs = self.options.incremental_runs
        for index in range(runs):
            self.found.no_change.append(self.sync(up, home))
            if index < self.options.on_disk_runs:  # for information: fewer, to save time
                self.found.no_change_on_disk.append(self.sync(up, home, through_instance=True))
        stats = up.stats()
        counts = {"assets_updated": stats["assets"] // 100, "leads_changed": stats["leads"] // 100}
        self.found.mutation = counts
        for _ in range(runs):
            up.mutate(counts)
            self.found.changed.append(self.sync(up, home))
        print(
            f"[{up.scale}] incremental: no change "
            f"{[round(r.seconds, 1) for r in self.found.no_change]}, after 1% "
            f"{[round(r.seconds, 1) for r in self.found.changed]}",
            flush=True,
        )

    def serving(self, group: ProcessGroup, home: Path) -> None:
        from ductwork import snapshots
        from ductwork.keys import KeyStore
        from ductwork.settings import HomeSettings

        settings = HomeSettings(home=home)
        key = KeyStore(settings.keys_path).create("bench", ["all"])
        snap = snapshots.current(settings.snapshots_dir)
        assert snap is not None
        with duckdb.connect(str(snap.path), read_only=True) as con:
            skus = [row[0] for row in con.execute("SELECT sku FROM units ORDER BY sku").fetchall()]
            indoor = con.execute(
                "SELECT count(*) FROM units WHERE unit_type = 'indoor-units'"
            ).fetchall()[0][0]
            assets = con.execute(
                "SELECT count(*) FROM digital_assets WHERE deleted_at IS NULL"
            ).fetchall()[0][0]
        kinds = {
            "SKU lookup": [f"/products/v2.0/units/{quote_sku(sku)}" for sku in skus],
            "list page, indoor units (count=100)": [
                f"/products/v2.0/indoor-units?count=100&page={n}"
                for n in range(1, math.ceil(indoor / 100) + 1)
            ],
            "list page, digital assets (count=100)": [
                f"/warehouse/v1.0/digital-assets?count=100&page={n}"
                for n in range(1, math.ceil(assets / 100) + 1)
            ],
        }
        ours_port, ceiling_port = (free_socket().getsockname()[1] for _ in range(2))
        ours_url, ceiling_url = (f"http://127.0.0.1:{p}" for p in (ours_port, ceiling_port))
        ours = group.start(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(ours_port),
            ],
            # The per-key limit would cap the load generator's single key; lift it here.
            env={
                **os.environ,
                "DUCTWORK_HOME": str(home),
                "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000000",
            },
        )
        wait_until_answering(ours_url + "/healthz", ours, timeout_s=300)
        bodies: dict[str, str] = {}
        ceiling_paths: dict[str, list[str]] = {}
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            for index, (kind, paths) in enumerate(kinds.items()):
                sample = client.get(ours_url + paths[len(paths) // 2])
                sample.raise_for_status()
                bodies[f"k{index}"] = sample.text
                ceiling_paths[kind] = [f"/k{index}/{n}" for n in range(len(paths))]
        bodies_file = self.work / "ceiling-bodies.json"
        bodies_file.write_text(json.dumps(bodies), encoding="utf-8")
        from ductwork.settings import ServeSettings

        workers = ServeSettings().serve_workers
        ceiling = group.start(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "bench.ceiling_app:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(ceiling_port),
                "--workers",
                str(workers),
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--log-level",
                "warning",
            ],
            env={**os.environ, "BENCH_CEILING_BODIES": str(bodies_file)},
        )
        wait_until_answering(ceiling_url + "/k0/0", ceiling, timeout_s=120)
        self.found.serving_setup = {
            "workers": workers,
            "body_bytes": {kind: len(bodies[f"k{i}"].encode()) for i, kind in enumerate(kinds)},
        }
        for kind, paths in kinds.items():
            ours_file = self.work / "paths-ours.txt"
            ceiling_file = self.work / "paths-ceiling.txt"
            results: dict[str, list[dict[str, float]]] = {"ductwork": [], "ceiling": []}
            for _ in range(self.options.runs):
                ours_file.write_text("\n".join(paths) + "\n", encoding="utf-8")
                results["ductwork"].append(self.wrk(ours_url, ours_file, key))
                ceiling_file.write_text("\n".join(ceiling_paths[kind]) + "\n", encoding="utf-8")
                results["ceiling"].append(self.wrk(ceiling_url, ceiling_file, None))
            self.found.serving[kind] = results
            if kind.startswith("SKU"):
                rate = 0.5 * statistics.median(r["rps"] for r in results["ceiling"])
                self.found.paced_rate = rate
                for _ in range(self.options.runs):
                    self.found.paced.append(self.wrk(ours_url, ours_file, key, rate))
            print(
                f"[serve] {kind}: ductwork {[round(r['rps']) for r in results['ductwork']]}, "
                f"ceiling {[round(r['rps']) for r in results['ceiling']]}",
                flush=True,
            )
        for child in (ours, ceiling):
            stop(child)

    def wrk(
        self, url: str, paths_file: Path, key: str | None, rate: float | None = None
    ) -> dict[str, float]:
        """One ``wrk`` run over the paths in ``paths_file``: at saturation, or paced at
        ``rate`` requests/s in all (each thread sending its share on a fixed schedule)."""
        options = self.options
        # paths.lua's arguments after the paths file: the key ("-" for none), then the rate
        script_args = [key or "-"]
        if rate:
            script_args.append(f"{rate / options.wrk_threads:.1f}")
        command = [
            "wrk",
            f"-t{options.wrk_threads}",
            f"-c{options.wrk_connections}",
            f"-d{options.serve_seconds}s",
            "--latency",
            "-s",
            str(HERE / "paths.lua"),
            url,
            "--",
            str(paths_file),
            *script_args,
        ]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        line = next(x for x in out.splitlines() if x.startswith("BENCH_JSON "))
        result = json.loads(line.removeprefix("BENCH_JSON "))
        if result["non_2xx"] or result["socket_errors"]:
            self.found.notes.append(
                f"wrk on {url}: {result['non_2xx']} non-2xx answers, "
                f"{result['socket_errors']} socket errors"
            )
        return result


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="repeats at medium (median of)")
    parser.add_argument(
        "--incremental-runs",
        type=int,
        default=5,
        help="no-change and changed runs each (median of; a second or a few each)",
    )
    parser.add_argument(
        "--on-disk-runs",
        type=int,
        default=1,
        help="no-change runs through `ductwork sync`'s instance on disk (for information)",
    )
    parser.add_argument(
        "--aiohttp-floor-runs",
        type=int,
        default=0,
        help="runs of the floor on aiohttp (for information; interleaved with the first ones)",
    )
    parser.add_argument("--large-runs", type=int, default=1, help="full syncs at large")
    parser.add_argument("--dlt-runs", type=int, default=1, help="dlt peer runs at medium")
    parser.add_argument("--dlt-large-runs", type=int, default=0, help="dlt peer runs at large")
    parser.add_argument("--scales", nargs="+", default=["medium", "large"])
    parser.add_argument("--floor-scales", nargs="*", default=["medium"])
    parser.add_argument("--serve-seconds", type=int, default=4, help="length of each wrk run")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--wrk-connections", type=int, default=32)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    options = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    ensure_wrk()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ductwork-bench-") as work, ProcessGroup() as group:
        suite = Suite(options, Path(work))
        s3_port = free_socket().getsockname()[1]
        s3_url = f"http://127.0.0.1:{s3_port}"
        moto = group.start(
            [
                "sh",
                "-c",
                'exec "$0" "$@" >/dev/null 2>&1',
                installed_command("moto_server"),
                "-H",
                "127.0.0.1",
                "-p",
                str(s3_port),
            ]
        )
        wait_until_answering(s3_url, moto)
        from assets.resources import ObjectStore
        from sandbox.server import seed_manuals

        s3 = ObjectStore(bucket=BUCKET, endpoint_url=s3_url).client()
        s3.create_bucket(Bucket=BUCKET)
        seed_manuals(s3, BUCKET, 1, 40)
        for scale in options.scales:
            with upstream(scale, group, s3_url) as up:
                suite.found.startup[scale] = up.startup_s
                print(f"[{scale}] sandbox up in {up.startup_s:.0f}s", flush=True)
                last = suite.full_vs_floor(up)
                # ductwork's own runs first: with INSERT load files the peer peaked at about
                # 12 GiB, and runs measured right after it found the machine's file cache
                # emptied (a no-change run took 3.6 s after it, 3.0 s without it).
                if scale == options.scales[0]:
                    with suite.part(f"incremental runs ({scale})"):
                        suite.incremental(up, last.home)
                    with suite.part("serving"):
                        suite.serving(group, last.home)
                suite.peer_runs(up)
            # What is measured so far is written at once: a long run stopped later keeps it.
            write_results(suite.found, options, started, done=scale == options.scales[-1])
    return 0


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
