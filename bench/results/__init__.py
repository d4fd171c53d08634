"""``bench/RESULTS.md`` from the suite's findings: a table per figure, each with every run, the
median, the ratio, the target and whether it is met. Nothing but what the run measured."""

from __future__ import annotations

import argparse
import os
import platform
from datetime import UTC, datetime
from typing import Any

from bench.findings import GIB, Findings
from bench.results.floors import FloorsSection
from bench.results.incremental import IncrementalSection
from bench.results.memory_and_forget import MemoryAndForgetSection
from bench.results.peak_rss import PeakRssSection
from bench.results.peer import PeerSection
from bench.results.publish import PublishSection
from bench.results.serving import ServingSection
from bench.results.tables import met, table
from bench.results.wall_time import WallTimeSection


class Report(
    FloorsSection,
    PeakRssSection,
    MemoryAndForgetSection,
    IncrementalSection,
    PeerSection,
    ServingSection,
    PublishSection,
    WallTimeSection,
):
    """Every section of the results file, written in turn on one summary and one body."""


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
    missed = sum(1 for row in report.summary if row[3] == met(False))
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
        *table(["figure", "value", "target", "met"], report.summary),
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
