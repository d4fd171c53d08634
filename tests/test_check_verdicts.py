"""The pure verdicts of the stream checks, from the metadata two runs recorded."""

from __future__ import annotations

from assets.checks import completeness_verdict, cursor_verdict, shrink_verdict


def test_a_table_may_shrink_up_to_the_limit_but_not_beyond_unless_reconciling() -> None:
    assert shrink_verdict({"dagster/row_count": 80}, {"dagster/row_count": 100}).passed
    assert not shrink_verdict({"dagster/row_count": 79}, {"dagster/row_count": 100}).passed
    reconciling = {"dagster/row_count": 10, "mode": "reconcile"}
    assert shrink_verdict(reconciling, {"dagster/row_count": 100}).passed


def test_a_first_run_or_a_growing_table_never_counts_as_shrinking() -> None:
    assert shrink_verdict({"dagster/row_count": 0}, None).passed
    assert shrink_verdict({"dagster/row_count": 120}, {"dagster/row_count": 100}).passed


def test_the_lead_cursor_may_stay_or_move_forward_but_never_back() -> None:
    before = {"cursor_created_date": "2026-01-02T00:00:00Z", "cursor_id": "00Q2"}
    same = dict(before)
    later_id = {"cursor_created_date": "2026-01-02T00:00:00Z", "cursor_id": "00Q3"}
    earlier = {"cursor_created_date": "2026-01-01T00:00:00Z", "cursor_id": "00Q9"}
    assert cursor_verdict(same, before).passed
    assert cursor_verdict(later_id, before).passed
    assert not cursor_verdict(earlier, before).passed
    assert not cursor_verdict({}, before).passed  # a cursor that vanished moved back
    assert cursor_verdict(earlier, None).passed  # nothing to compare with yet


def test_a_cursor_recorded_with_another_offset_is_compared_as_an_instant() -> None:
    # 01:00+05:30 is 19:30Z the day before: as text it sorts after 2026-01-01T20:00Z.
    before = {"cursor_created_date": "2026-01-02T01:00:00.000+0530", "cursor_id": "00Q2"}
    later = {"cursor_created_date": "2026-01-01T20:00:00.000Z", "cursor_id": "00Q1"}
    assert cursor_verdict(later, before).passed


def test_a_full_listing_must_load_exactly_the_total_the_upstream_reported() -> None:
    assert completeness_verdict({"dagster/row_count": 5, "reported_total": 5}).passed
    short = completeness_verdict({"dagster/row_count": 4, "reported_total": 5})
    assert not short.passed and short.metadata["missing"].value == 1
    assert completeness_verdict({"dagster/row_count": 4}).passed  # incremental: no total
