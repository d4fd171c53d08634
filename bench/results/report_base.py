"""What every section of the results file writes with: the findings and options of the run,
the summary's rows, the body's lines, a row of runs and a verdict."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from bench.findings import Findings
from bench.results.tables import median, met, run_cells


class ReportBase:
    """The results file being written: its summary rows (figure, value, target, met) and the
    body's lines, from ``found`` and the run's ``options``."""

    def __init__(self, found: Findings, options: argparse.Namespace) -> None:
        self.found = found
        self.options = options
        self.width = max(options.runs, options.large_runs, options.dlt_runs, 1)
        self.first = next(iter(found.full), "medium")
        self.summary: list[list[object]] = []
        self.body: list[str] = []

    def run_header(self, first: str) -> list[str]:
        """A table's header: ``first``, a column per run, the median."""
        return [first, *(f"run {i + 1}" for i in range(self.width)), "median"]

    def row(self, label: str, values: Sequence[float], fmt: str = ".2f") -> list[str]:
        """A table's row: ``label``, each run's value in ``fmt`` and their median."""
        return [label, *run_cells(values, fmt, self.width), format(median(values), fmt)]

    def verdict(self, figure: str, value: str, target: str, ok: bool) -> str:
        """Add ``figure`` to the summary; its met/missed word for the body."""
        self.summary.append([figure, value, target, met(ok)])
        return met(ok)

    def full_s(self, scale: str | None = None) -> float:
        """The median seconds of the full syncs at ``scale`` (the first scale by default)."""
        return median(r.seconds for r in self.found.full.get(scale or self.first, []))
