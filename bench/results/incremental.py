"""Section 3 of the results file: the incremental syncs against a no-op Dagster run and the
full sync, and their steps."""

from __future__ import annotations

from bench.findings import SyncRun
from bench.results.report_base import ReportBase
from bench.results.tables import median, steps_slowest_first, table
from bench.results.targets import CHANGED_SHARE_OF_FULL, NO_CHANGE_TARGET


class IncrementalSection(ReportBase):
    """3. Incremental ``ductwork sync`` runs."""

    def incremental(self) -> None:
        """The no-change and changed runs beside the start-up floor and the no-op Dagster run,
        judged, then their steps."""
        found = self.found
        if not found.no_change:
            return
        # The incremental runs fetch from the sandbox: their share is of its full sync.
        base = found.sandbox_full.get(self.first)
        full = base.seconds if base is not None else self.full_s()
        startup = median(found.startup_floor)
        noop = median(found.noop_run)
        quiet = median(r.seconds for r in found.no_change)
        changed = median(r.seconds for r in found.changed)
        counts = ", ".join(f"{k} = {v:,}" for k, v in found.mutation.items())
        self.body += [
            f"### 3. Incremental `ductwork sync` runs, scale `{self.first}`",
            "",
            "Whole `uv run --frozen ductwork sync` processes on the last full sync's data folder "
            "(its instance on disk), against the sandbox. The no-op Dagster run "
            "(`bench.noop_run`) is a run of one asset that does nothing, on an instance set up "
            "as the sync's in a folder of its own, started the same way: what any Dagster run "
            "costs before ductwork's own work. The start-up floor (a reference) is `uv run "
            "--frozen python -c 'import dagster, duckdb'`, each run just before a no-change "
            "run. Each changed run "
            f"follows one `POST /_sandbox/mutate` of {counts} (1 % of assets and of leads).",
            "",
        ]
        rows = [
            [*self.row("start-up floor (reference), s", found.startup_floor), "–"],
            [*self.row("no-op Dagster run, s", found.noop_run), "0"],
            [*self.row("no change, s", [r.seconds for r in found.no_change]),
             f"{found.no_change[-1].requests:,}"],
            [*self.row("after 1 % changed, s", [r.seconds for r in found.changed]),
             f"{found.changed[-1].requests:,}" if found.changed else "–"],
        ]  # fmt: skip
        self.body += table([*self.run_header("run"), "upstream requests"], rows)
        ratio = quiet / noop
        share = CHANGED_SHARE_OF_FULL
        bound = quiet + share * full
        a = self.verdict(
            "no-change sync / no-op Dagster run", f"{ratio:.2f}", f"≤ {NO_CHANGE_TARGET}",
            ratio <= NO_CHANGE_TARGET,
        )  # fmt: skip
        b = self.verdict(
            "sync after 1 % changed",
            f"{changed:.2f} s",
            f"≤ no-change + {share:.0%} of full = {bound:.2f} s",
            changed <= bound,
        )
        self.body += [
            f"no change / no-op Dagster run = **{ratio:.2f}** (target ≤ {NO_CHANGE_TARGET}: "
            f"{a}); no change / start-up floor = {quiet / startup:.2f} (no target: issue 45 "
            "measures against the no-op run instead). After 1 % "
            f"changed: **{changed:.2f} s** against {quiet:.2f} s + {share:.0%} of the full "
            f"sync's {full:.1f} s (against the sandbox) = {bound:.2f} s: {b}.",
            "",
        ]
        self.steps(found.no_change, found.changed)

    def steps(self, quiet: list[SyncRun], changed: list[SyncRun]) -> None:
        """Every step either kind of run reported, slowest after a change first: the publish,
        which only a run with changes makes, included."""
        names = steps_slowest_first(changed or quiet, also=quiet)
        if not names:
            return
        rows = [
            [
                name,
                f"{median(r.steps.get(name, 0) for r in quiet):.2f}",
                f"{median(r.steps.get(name, 0) for r in changed):.2f}",
            ]
            for name in names
        ]
        self.body += ["Steps as `ductwork sync` reports them (median, seconds):", ""]
        self.body += table(["step", "no change", "after 1 % changed"], rows)
