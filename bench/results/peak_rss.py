"""Section 2 of the results file: the peak RSS of a full sync at each scale."""

from __future__ import annotations

from bench.findings import MIB
from bench.results.report_base import ReportBase
from bench.results.tables import median, table
from bench.results.targets import LARGE_RSS_TARGET, PEAK_RSS_TARGET_MIB


class PeakRssSection(ReportBase):
    """2. Peak RSS of a full sync."""

    def memory(self) -> None:
        """Every full sync's peak RSS by scale, the first scale's judged, and large against it."""
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
        self.body += table(self.run_header("scale"), rows)
        first = median(r.peak_rss for r in full.get(self.first, []))
        if first == first:  # not NaN
            self.verdict(
                f"peak RSS, full sync ({self.first})",
                f"{first / MIB:.0f} MiB",
                f"≤ {PEAK_RSS_TARGET_MIB} MiB",
                first <= PEAK_RSS_TARGET_MIB * MIB,
            )
        if "large" in full and self.first != "large":
            large = median(r.peak_rss for r in full["large"])
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
