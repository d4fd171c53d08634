"""The suite's own wall time: the budget's verdict and where the time went."""

from __future__ import annotations

from bench.results.report_base import ReportBase
from bench.results.tables import table
from bench.results.targets import BUDGET_MIN


class WallTimeSection(ReportBase):
    """The suite's own wall time, against its budget."""

    def budget(self, total_s: float) -> None:
        """The suite's ``total_s`` judged against the budget, and each part's share of it."""
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
            *table(["part", "min", "share"], rows),
        ]
