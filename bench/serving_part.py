"""The suite's serving part: ``ductwork serve`` as the CLI starts it against the ceiling on each
mix, at saturation, then the lookup mix paced by the open-loop generator."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

from bench.findings import Findings
from bench.launching import ROOT, pin, stop
from bench.measuring import process_tree
from bench.serving_load import (
    Target,
    create_key,
    run_wrk,
    start_ceiling,
    start_ductwork_serve,
    with_server_cpu,
)
from pipelines.processes import ProcessGroup


class ServingPart:
    """The serving part of the suite, measured on its options, work folder and findings."""

    options: argparse.Namespace
    work: Path
    found: Findings

    def serving(self, group: ProcessGroup, home: Path, scale: str) -> None:
        """``ductwork serve`` as the CLI starts it against the ceiling, on this scale's mixes."""
        from bench.serving_mix import mixes_for

        key = create_key(home)
        ours_url, ours = start_ductwork_serve(group, home)
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
