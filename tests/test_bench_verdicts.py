"""The serving verdicts of ``bench/results.py`` count failures: a run whose answers are not the
mix's (a 401, a 503, too many 404s) or that lost requests cannot meet a target, whatever its
rate. Unit tests of the verdict logic on made-up run results (no server needed)."""

from __future__ import annotations

import argparse

from bench.results import (
    LOSS_LIMIT,
    Report,
    answers_held,
    lost_requests,
    unexpected_answers,
)
from bench.suite import Findings

LOOKUPS = "SKU lookups (7/10 found, 1/10 gzip, 1/10 304, 1/10 404)"
EXPECTED = {"200": 0.8, "304": 0.1, "404": 0.1}


def run(rps: float, statuses: dict[str, int], socket_errors: int = 0) -> dict:
    return {"rps": rps, "p50_ms": 1.0, "p99_ms": 5.0, "statuses": statuses,
            "socket_errors": socket_errors}  # fmt: skip


def test_answers_in_the_mix_shares_are_all_expected() -> None:
    assert unexpected_answers({"200": 8000, "304": 1000, "404": 1000}, EXPECTED) == 0
    # Round robin from a random start strays a little: within the slack.
    assert unexpected_answers({"200": 7950, "304": 1010, "404": 1040}, EXPECTED) == 0


def test_a_status_the_mix_never_asks_for_counts_whole_and_an_excess_counts_beyond_its_share() -> (
    None
):
    assert unexpected_answers({"200": 8000, "304": 1000, "401": 1000}, EXPECTED) == 1000
    assert unexpected_answers({"503": 10}, EXPECTED) == 10
    # Every lookup a 404: all but a tenth (and the slack) are unexpected.
    assert unexpected_answers({"404": 10_000}, EXPECTED) == 10_000 - 1100


def test_a_run_holds_only_without_unexpected_answers_and_with_losses_within_the_limit() -> None:
    good = {"200": 8000, "304": 1000, "404": 1000}
    assert answers_held(run(1, good), EXPECTED)
    assert answers_held(run(1, good, socket_errors=10), EXPECTED)  # 10 of 10,010: under 0.1 %
    assert not answers_held(run(1, good, socket_errors=11), EXPECTED)
    assert LOSS_LIMIT == 0.001
    assert not answers_held(run(1, {**good, "429": 1}), EXPECTED)
    assert not answers_held(run(1, {}), EXPECTED)  # counted nothing: proves nothing
    paced = {"statuses": good, "unanswered": 11, "asked": 10_011}
    assert lost_requests(paced) == 11 and not answers_held(paced, EXPECTED)


def _report(ours: list[dict]) -> Report:
    found = Findings()
    found.serving = {LOOKUPS: {"ductwork": ours, "ceiling": [run(10_000, {"200": 10})] * 3}}
    found.serving_setup = {
        "workers": 2, "mixes": {LOOKUPS: "every SKU in turn"}, "expected": {LOOKUPS: EXPECTED},
    }  # fmt: skip
    options = argparse.Namespace(
        runs=3, large_runs=1, dlt_runs=1, wrk_threads=2, wrk_connections=32, serve_seconds=4
    )
    report = Report(found, options)
    report.serving()
    return report


def test_a_fast_server_answering_401_misses_the_serving_target_and_the_table_shows_counts() -> None:
    good = {"200": 8000, "304": 1000, "404": 1000}
    met = _report([run(9000, good)] * 3)
    assert met.summary[0][-1] == "**met**"

    refused = _report([run(9000, good), run(20_000, {"401": 10_000}), run(9000, good)])
    _, value, _, word = refused.summary[0]
    assert word == "**missed**" and "answers not as the mix asks" in value
    row = next(line for line in refused.body if line.startswith("| ductwork"))
    assert row.rstrip(" |").endswith("| 10,000 | 0")

    lossy = _report([run(9000, good, socket_errors=500)] * 3)
    assert lossy.summary[0][-1] == "**missed**"
