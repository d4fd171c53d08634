"""The pieces every section of the results file is written with: medians, Markdown tables, a
row's run cells and the met/missed word."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from bench.findings import SyncRun


def median(values: Iterable[float]) -> float:
    """The median of ``values``; NaN when there are none."""
    values = list(values)
    return statistics.median(values) if values else float("nan")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table of ``rows`` under ``header``, and the blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def run_cells(values: Sequence[float], fmt: str, width: int) -> list[str]:
    """A cell per run in ``fmt``, dashes for the runs not made up to ``width``."""
    cells = [format(v, fmt) for v in values]
    return cells + ["–"] * (width - len(cells))


def met(ok: bool) -> str:
    """The verdict's word, in bold."""
    return "**met**" if ok else "**missed**"


def steps_slowest_first(runs: Sequence[SyncRun], also: Sequence[SyncRun] = ()) -> list[str]:
    """The names of the steps the runs (and the runs ``also``) reported, by their median
    seconds in ``runs``, slowest first."""
    names = {name for run in [*runs, *also] for name in run.steps}
    return sorted(names, key=lambda name: -median(run.steps.get(name, 0) for run in runs))
