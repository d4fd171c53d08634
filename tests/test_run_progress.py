"""What ``ductwork sync`` prints about a run: step lines and the rows changed per stream."""

from __future__ import annotations

import dagster as dg
from dagster._utils.error import SerializableErrorInfo

from pipelines.run_progress import StepLine, failure_reason, rows_changed, snapshot_line


def test_rows_changed_are_what_a_step_reports_it_wrote_or_deleted_not_its_size() -> None:
    assert rows_changed({"dagster/row_count": 400, "rows_changed": 0}) == 0
    assert rows_changed({"dagster/row_count": 20_000, "rows_changed": 15}) == 15
    assert rows_changed({"dagster/row_count": 400, "rows_changed": dg.IntMetadataValue(7)}) == 7
    assert rows_changed({"dagster/row_count": 400}) == 0  # not a stream's step: no count


def test_a_step_line_names_its_assets_rows_checks_and_seconds() -> None:
    line = StepLine(assets={"catalog_items": 400, "pairings": 1_500}, checks_warned=1)
    rendered = line.render("catalog", 1.25)
    assert "catalog_items 400" in rendered and "pairings 1,500 rows" in rendered
    assert "1 warned" in rendered and rendered.endswith("(1.2 s)")
    assert "12,000 rows" in StepLine(assets={"crm_leads": 12_000}).render("crm_leads", 0.1)


def test_the_publish_reports_whether_its_snapshot_is_new_or_confirmed() -> None:
    new = snapshot_line("serving_snapshot", {"version": "v2", "new_copy": True})
    same = snapshot_line("serving_snapshot", {"version": "v1", "new_copy": False})
    assert new == "version v2 (new)"
    assert same == "version v1 (confirmed, nothing changed)"
    assert snapshot_line("pairings", {"version": "v1"}) is None


def step_failure_error(asset: dg.AssetsDefinition) -> SerializableErrorInfo | None:
    """The error of the step failure a run of ``asset`` reports (an in-memory instance: this
    checks the wording of the line, not a run on disk)."""
    result = dg.materialize([asset], raise_on_error=False)
    (failure,) = [
        event for event in result.all_events
        if event.event_type == dg.DagsterEventType.STEP_FAILURE
    ]  # fmt: skip
    return failure.step_failure_data.error


@dg.asset
def fails_once() -> None:
    raise ValueError("the upstream answered 200 with no body")


@dg.asset(retry_policy=dg.RetryPolicy(max_retries=1))
def fails_after_its_retry() -> None:
    raise ValueError("failed to pin block of size 256.0 KiB")


def test_a_failed_step_s_line_names_the_error_raised_not_dagster_s_wrapper() -> None:
    assert failure_reason(step_failure_error(fails_once)) == (
        "ValueError: the upstream answered 200 with no body"
    )


def test_a_step_that_used_up_its_retries_names_the_last_error_and_the_retries() -> None:
    assert failure_reason(step_failure_error(fails_after_its_retry)) == (
        "ValueError: failed to pin block of size 256.0 KiB (Exceeded max_retries of 1)"
    )


@dg.asset
def refuses_on_purpose() -> None:
    raise dg.Failure(description="GET /x: refused, page 2 repeats page 1", allow_retries=False)


def test_a_step_that_failed_on_purpose_is_named_by_its_description_alone() -> None:
    assert failure_reason(step_failure_error(refuses_on_purpose)) == (
        "GET /x: refused, page 2 repeats page 1"
    )
