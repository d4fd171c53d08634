"""Section 6 of the results file: the snapshot publish time at each scale."""

from __future__ import annotations

from bench.results.report_base import ReportBase
from bench.results.tables import table


class PublishSection(ReportBase):
    """6. Snapshot publish."""

    def publish(self) -> None:
        """The ``serving_snapshot`` step of every full sync, by scale."""
        rows = [
            self.row(f"{scale}, s", [r.publish_s for r in runs], ".2f")
            for scale, runs in self.found.full.items()
        ]
        self.body += [
            "### 6. Snapshot publish (the `serving_snapshot` step, as the full sync reports it; "
            "no target)",
            "",
            *table(self.run_header("scale"), rows),
        ]
