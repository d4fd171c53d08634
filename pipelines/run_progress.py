"""What an operator sees of a run on the terminal: one line per finished step, then a summary.

Dagster's own event stream (about a hundred DEBUG lines a run) stays in the run's page in the
UI, and on the terminal behind ``ductwork sync --verbose``. The ``progress`` logger prints only
finished steps, failures and the messages assets log at INFO or above (a run waiting for the
warehouse says whom it waits for).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import dagster as dg

if TYPE_CHECKING:
    from dagster._utils.error import SerializableErrorInfo

INTERRUPTED = {"RunInterrupted", "DagsterExecutionInterruptedError", "KeyboardInterrupt"}
# The metadata entry in which every stream step reports the rows it wrote or deleted.
CHANGED = "rows_changed"


def _number(value: Any) -> float | None:
    raw = getattr(value, "value", value)
    return raw if isinstance(raw, int | float) and not isinstance(raw, bool) else None


def _metadata(event: dg.DagsterEvent) -> Mapping[str, Any]:
    materialization = event.step_materialization_data.materialization
    return materialization.metadata


def snapshot_line(key: str, metadata: Mapping[str, Any]) -> str | None:
    """The snapshot a publish made or confirmed; None for any other asset."""
    if key != "serving_snapshot":
        return None
    version = getattr(metadata.get("version"), "value", metadata.get("version"))
    new = getattr(metadata.get("new_copy"), "value", metadata.get("new_copy"))
    return f"version {version} ({'new' if new else 'confirmed, nothing changed'})"


@dataclass
class StepLine:
    """What one step materialised, as it finishes."""

    assets: dict[str, int] = field(default_factory=dict)
    checks_passed: int = 0
    checks_failed: int = 0
    checks_warned: int = 0
    snapshot: str | None = None

    def render(self, step: str, seconds: float) -> str:
        """The step's line: its name, the rows each asset has, its checks, its time."""
        parts = []
        if self.snapshot:
            parts.append(self.snapshot)
        elif self.assets:
            if list(self.assets) == [step]:
                parts.append(f"{self.assets[step]:,} rows")
            else:
                parts.append(", ".join(f"{key} {rows:,}" for key, rows in self.assets.items()))
                parts[-1] += " rows"
        if self.checks_passed or self.checks_failed or self.checks_warned:
            checks = f"{self.checks_passed} checks passed"
            if self.checks_warned:
                checks += f", {self.checks_warned} warned"
            parts.append(f"{checks}, {self.checks_failed} failed")
        detail = "; ".join(parts) or "done"
        return f"  ok  {step:<28} {detail}  ({seconds:.1f} s)"


class ProgressHandler(logging.Handler):
    """Turns Dagster's events into step lines on ``stream``."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.DEBUG)  # Dagster's events arrive at DEBUG
        self.stream = stream
        self.steps: dict[str, StepLine] = {}

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event: dg.DagsterEvent | None = meta.get("dagster_event")
        if event is None:
            if record.levelno >= logging.INFO:
                self._print(f"  ..  {meta.get('orig_message') or record.getMessage()}")
            return
        step = event.step_key or ""
        if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            metadata = _metadata(event)
            rows = _number(metadata.get("dagster/row_count"))
            key = event.asset_key.to_user_string() if event.asset_key else step
            line = self.steps.setdefault(step, StepLine())
            line.assets[key] = int(rows or 0)
            line.snapshot = snapshot_line(key, metadata)
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            line = self.steps.setdefault(step, StepLine())
            evaluation = event.asset_check_evaluation_data
            if evaluation.passed:
                line.checks_passed += 1
            elif evaluation.severity == dg.AssetCheckSeverity.WARN:
                line.checks_warned += 1
            else:
                line.checks_failed += 1
        elif event.event_type == dg.DagsterEventType.STEP_SUCCESS:
            seconds = event.step_success_data.duration_ms / 1000
            self._print(self.steps.pop(step, StepLine()).render(step, seconds))
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            if error is not None and error.cls_name in INTERRUPTED:
                self._print(f"  --  {step} stopped (interrupted)")
                return
            self._print(f"  FAILED {step}: {failure_reason(error)}")
        elif event.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE:
            error = getattr(event.event_specific_data, "error", None)
            reason = error.message.strip().splitlines()[-1] if error else "failed"
            self._print(f"  FAILED setting up the run: {reason}")
        elif event.event_type == dg.DagsterEventType.STEP_SKIPPED:
            self._print(f"  --  {step} skipped (an upstream step or blocking check failed)")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


def failure_reason(error: SerializableErrorInfo | None) -> str:
    """The first line of the error that made a step fail, not of Dagster's wrapper around it
    ("Error occurred while executing op"), with the retry policy's verdict when it gave up.
    A ``dg.Failure`` an asset raised on purpose is its description alone."""
    if error is None:
        return "failed"
    cause = error
    while cause.cause is not None:
        cause = cause.cause
    reason = _first_line(cause.message) or _first_line(error.message) or error.cls_name
    if cause.cls_name == "Failure":
        reason = reason.partition("Failure: ")[2] or reason
    if error.cls_name == "RetryRequestedFromPolicy" and cause is not error:
        reason += f" ({_first_line(error.message)})"
    return reason


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


@dg.logger(description="One line per finished step; what `ductwork sync` prints.")
def progress_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    """A logger printing finished steps to stdout."""
    log = logging.Logger("ductwork.progress", level=logging.DEBUG)
    log.addHandler(ProgressHandler(sys.stdout))
    return log


def logger_config(verbose: bool) -> dict[str, Any]:
    """Run config of the loggers: step lines, and Dagster's whole stream when verbose."""
    loggers: dict[str, Any] = {"progress": {}}
    if verbose:
        loggers["console"] = {"config": {"log_level": "DEBUG"}}
    return {"loggers": loggers}


@dataclass(frozen=True)
class RunSummary:
    """What a finished run did, for the lines printed after it."""

    run_id: str
    status: str
    rows_changed: dict[str, int]
    snapshot: str | None
    seconds: float

    def lines(self) -> list[str]:
        """The summary as printed."""
        out = [f"run {self.run_id}: {self.status.lower()} in {self.seconds:.1f} s"]
        if self.rows_changed:
            changed = ", ".join(f"{key} {rows:,}" for key, rows in self.rows_changed.items())
            out.append(f"  rows changed: {changed}")
        else:
            out.append("  rows changed: none")
        if self.snapshot:
            out.append(f"  snapshot: {self.snapshot}")
        return out


def rows_changed(metadata: Mapping[str, Any]) -> int:
    """Rows a materialisation wrote or deleted, as its metadata tells (0 when it does not)."""
    return int(_number(metadata.get(CHANGED)) or 0)


def summarise(
    run_id: str, status: str, events: Iterable[dg.DagsterEvent], seconds: float
) -> RunSummary:
    """The summary of a run from its events."""
    changed: dict[str, int] = {}
    snapshot = None
    for event in events:
        if event.event_type != dg.DagsterEventType.ASSET_MATERIALIZATION:
            continue
        metadata = _metadata(event)
        key = event.asset_key.to_user_string() if event.asset_key else ""
        if key == "serving_snapshot":
            snapshot = snapshot_line(key, metadata)
            continue
        total = rows_changed(metadata)
        if total:
            changed[key] = changed.get(key, 0) + total
    return RunSummary(run_id, status, changed, snapshot, seconds)
