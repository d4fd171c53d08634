"""Serving then and now: ``ductwork serve`` of an earlier commit and of this tree, side by side,
with the ceiling beside them, on the serving part's mixes.

A target of the form "not lower than the share of the ceiling recorded when the issue was
filed" compares runs made on different days, and on a machine whose two cores the server, the
ceiling and ``wrk`` share, the ceiling's own rate moves by a third from one day, or one run, to
the next. What such a target asks is measured here instead, in one run: the same mixes against
the earlier code, this tree's code and the ceiling, alternated run by run, each server on a
snapshot its own code synced from the same sandbox.

    uv run --frozen --group bench python -m bench.serving_then_and_now --base COMMIT

The earlier code runs from a git worktree of ``--base`` with its own environment (``uv run
--frozen`` there, from its own lock file); each side syncs the ``--scale`` sandbox into a fresh
data folder with its own ``ductwork sync``, makes its key with its own ``ductwork keys create``,
and is served by its own ``ductwork serve`` as the CLI starts it. The mixes are
``bench.serving_mix``'s, sampled from each side's own answers; the ceiling copies this tree's.
Prints each run, then per mix and server the medians of requests/s and of server CPU per
answer, and each side's share of the ceiling (the median of its runs' shares, each run paired
with the ceiling run after it). Leaves ``bench/RESULTS.md`` alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.launching import ROOT, UV, prepare_this_process, stop
from bench.results.targets import cpu_per_answer_runs
from bench.serving_load import SERVE_UNDER_LOAD, run_wrk, start_ceiling, with_server_cpu
from bench.serving_mix import Mix, mixes_for
from bench.upstreams import BUCKET, KEY, start_object_store, upstream
from ductwork.settings import ServeSettings, upstream_environment
from pipelines.processes import ProcessGroup, wait_until_answering
from sandbox.local_server import free_socket


@dataclass
class Side:
    """One server measured: its code's root, its data folder, its key, its process and URL."""

    name: str
    root: Path
    home: Path
    key: str = ""
    url: str = ""
    process: subprocess.Popen | None = None

    def ductwork(self, *arguments: str) -> list[str]:
        """The command line of ``ductwork ARGUMENTS`` as a user of this side's code runs it."""
        return [UV, "run", "--frozen", "--directory", str(self.root), "ductwork", *arguments]

    def environment(self, **more: str) -> dict[str, str]:
        """The environment of this side's processes."""
        return {**os.environ, "DUCTWORK_HOME": str(self.home), **more}


@contextmanager
def worktree(commit: str, where: Path) -> Iterator[Path]:
    """A detached git worktree of ``commit`` at ``where``, removed on exit."""
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--force", str(where), commit],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False)


def sync_and_key(side: Side, upstream_env: dict[str, str]) -> None:
    """A full sync into the side's fresh data folder and a key with every scope, each through
    the side's own CLI."""
    side.home.mkdir(parents=True)
    print(f"[then-and-now] {side.name}: ductwork sync", flush=True)
    subprocess.run(
        side.ductwork("sync"), env=side.environment(**upstream_env), check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    made = subprocess.run(
        side.ductwork("keys", "create", "bench", "--scope", "all"),
        env=side.environment(), check=True, capture_output=True, text=True,
    )  # fmt: skip
    side.key = made.stdout.strip().splitlines()[-1]  # the key is printed last, alone


def serve(side: Side, group: ProcessGroup) -> None:
    """``ductwork serve`` of the side on a free port, answering."""
    port = free_socket().getsockname()[1]
    side.url = f"http://127.0.0.1:{port}"
    command = side.ductwork("serve", "--host", "127.0.0.1", "--port", str(port))
    side.process = group.start(command, env=side.environment(**SERVE_UNDER_LOAD))
    wait_until_answering(side.url + "/healthz", side.process, timeout_s=300)


def measure(
    mixes: dict[str, list[Mix]],
    sides: list[Side],
    ceiling: tuple[subprocess.Popen, str],
    work: Path,
    options: argparse.Namespace,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per mix, per server (each side and ``ceiling``), the runs: each round runs every server
    once, in turn."""
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    ceiling_process, ceiling_url = ceiling
    for index, mix in enumerate(mixes[sides[-1].name]):
        targets = []
        for side in sides:
            paths_file = work / f"paths-{side.name}-{index}.txt"
            paths_file.write_text("\n".join(mixes[side.name][index].ours) + "\n", encoding="utf-8")
            assert side.process is not None
            targets.append((side.name, side.process, side.url, paths_file, side.key))
        ceiling_file = work / f"paths-ceiling-{index}.txt"
        ceiling_file.write_text("\n".join(mix.ceiling) + "\n", encoding="utf-8")
        targets.append(("ceiling", ceiling_process, ceiling_url, ceiling_file, None))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in targets}
        for _, _, url, paths_file, key in targets:  # a first run each, not counted
            run_wrk(url, paths_file, key, options, None)
        for round_number in range(options.runs):
            for name, process, url, paths_file, key in targets:
                load = partial(run_wrk, url, paths_file, key, options, None)
                result = with_server_cpu(process.pid, load)
                runs[name].append(result)
                print(
                    f"[then-and-now] {mix.name} round {round_number + 1}, {name}: "
                    f"{result['rps']:,.0f} requests/s, "
                    f"{cpu_per_answer_runs([result])[0]:.1f} µs of server CPU per answer, "
                    f"statuses {result['statuses']}",
                    flush=True,
                )
        found[mix.name] = runs
    return found


def report(found: dict[str, dict[str, list[dict[str, Any]]]], sides: list[Side]) -> str:
    """The medians and shares as Markdown."""
    lines = []
    for mix, runs in found.items():
        lines += [
            f"### {mix}",
            "",
            "| server | requests/s (median) | server CPU per answer, µs (median) "
            "| share of the ceiling (median of paired runs) |",
            "| --- | --- | --- | --- |",
        ]
        for name, results in runs.items():
            rps = statistics.median(r["rps"] for r in results)
            cpu = statistics.median(cpu_per_answer_runs(results))
            share = "–"
            if name != "ceiling":
                paired = zip(results, runs["ceiling"], strict=True)
                share = f"{statistics.median(r['rps'] / c['rps'] for r, c in paired):.0%}"
            lines.append(f"| {name} | {rps:,.0f} | {cpu:.1f} | {share} |")
        now, then = (statistics.median(r["rps"] for r in runs[s.name]) for s in sides[::-1])
        lines += ["", f"{sides[-1].name} / {sides[0].name}, requests/s: **{now / then:.2f}**", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--runs", type=int, default=5, help="rounds per mix (medians)")
    parser.add_argument("--serve-seconds", type=int, default=4, help="length of each load run")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--wrk-connections", type=int, default=32)
    parser.add_argument("--out", type=Path, help="also write the medians there (Markdown)")
    options = parser.parse_args()
    os.chdir(ROOT)
    prepare_this_process()
    with (
        tempfile.TemporaryDirectory(prefix="ductwork-then-and-now-") as folder,
        ProcessGroup() as group,
    ):
        work = Path(folder)
        with worktree(options.base, work / "base") as base_root:
            sides = [Side(f"base ({options.base})", base_root, work / "home-base"),
                     Side("this tree", ROOT, work / "home-now")]  # fmt: skip
            s3_url = start_object_store(group)
            with upstream(options.scale, group, s3_url) as up:
                upstream_env = upstream_environment(up.url, KEY, up.s3_url, BUCKET)
                for side in sides:
                    sync_and_key(side, upstream_env)
            mixes = {}
            for side in sides:
                serve(side, group)
                mixes[side.name] = mixes_for(options.scale, side.home, side.url, side.key)
            answers: dict[str, dict[str, Any]] = {}
            for mix in mixes[sides[-1].name]:
                answers.update(mix.ceiling_answers)
            workers = ServeSettings().serve_workers
            ceiling = start_ceiling(group, answers, work / "ceiling-answers.json", workers)
            try:
                found = measure(mixes, sides, ceiling, work, options)
            finally:
                for process in (ceiling[0], *(side.process for side in sides)):
                    if process is not None:
                        stop(process)
    text = report(found, sides)
    print(text, flush=True)
    if options.out is not None:
        options.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
