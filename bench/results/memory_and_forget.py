"""The parts measured by modules of their own, as those modules report them: the mirror's memory
(``bench.memory``) and forgetting a person (``bench.forget``)."""

from __future__ import annotations

from bench.results.report_base import ReportBase


class MemoryAndForgetSection(ReportBase):
    """The mirror's memory and forgetting a person."""

    def history(self) -> None:
        """The mirror's memory (``bench.memory``): its figures in the summary, its section."""
        found = self.found.history
        if found is None:
            return
        from bench.memory import FIGURES, TARGETS, report

        ratios = found.ratios()
        for name, label in FIGURES.items():
            self.verdict(
                f"{label} ({found.scale})",
                f"{ratios[name]:.2f}",
                f"≤ {TARGETS[name]:g}",
                ratios[name] <= TARGETS[name],
            )
        self.body += [*report(found), ""]

    def forget(self) -> None:
        """``ductwork forget`` of one lead (``bench.forget``): its summary row and section."""
        found = self.found.forget
        if found is None:
            return
        from bench.forget import report

        lines, (figure, value, target, ok) = report(found, self.first)
        self.verdict(figure, value, target, ok)
        self.body += ["### Forgetting a person", "", *lines]
