"""The serving verdicts of ``bench.results`` count failures: a run whose answers are not the
mix's (a 401, a 503, too many 404s) or that lost requests cannot meet a target, whatever its
rate; and the sync's targets compare like with like. Unit tests of the verdict logic on
made-up run results (no server needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.findings import MIB, Findings, SyncRun
from bench.measuring import Measured
from bench.memory import MemoryFindings
from bench.results import Report, render
from bench.results.targets import LOSS_LIMIT, answers_held, lost_requests, unexpected_answers

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


def _report(ours: list[dict], ceiling: list[dict] | None = None) -> Report:
    found = Findings()
    ceiling = ceiling or [run(10_000, {"200": 10})] * 3
    found.serving = {LOOKUPS: {"ductwork": ours, "ceiling": ceiling}}
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


def _sync(seconds: float, rss_mib: int, cpu_s: float, requests: int = 100) -> SyncRun:
    return SyncRun(seconds, rss_mib * MIB, requests, Path("unused"), {}, cpu_s, 0.0)


def _floors_and_syncs(misses: list[int], requests: int = 100) -> Findings:
    """Three replayed syncs beside both floors, one large sync, a sandbox sync and dlt."""
    found = Findings()
    found.raw_floor = {"medium": [8.0, 8.0, 8.0]}
    found.aiohttp_floor = {"medium": [10.0, 10.0, 10.0]}
    found.floor_requests = {"medium": 100}
    found.floor_cpu = {"raw": [8.0] * 3, "aiohttp": [10.0] * 3}
    found.floor_upstream_cpu = {"raw": [2.0, 2.6, 2.0], "aiohttp": [3.0, 3.0, 4.0]}
    found.replay_misses = {"medium": {"raw floor": [0, 0, 0], "full sync": misses}}
    found.full = {
        "medium": [_sync(14.0, 340, 18.0, requests), _sync(16.0, 340, 21.0, requests),
                   _sync(15.0, 360, 20.0, requests)],
        "large": [_sync(100.0, 660, 99.0)],
    }  # fmt: skip
    found.sandbox_full = {"medium": _sync(30.0, 600, 20.0)}
    found.peer = {"medium": [Measured(370.0, 2000 * MIB, {"seconds": 360.0})]}
    return found


def _verdicts(found: Findings) -> tuple[dict[str, tuple[str, str]], Report]:
    report = Report(found, argparse.Namespace(runs=3, large_runs=1, dlt_runs=1))
    report.floors()
    report.memory()
    report.peer()
    return {figure: (value, word) for figure, value, _, word in report.summary}, report


def test_the_syncs_targets_judge_replayed_runs_against_the_raw_floor() -> None:
    """Wall and CPU against the raw floor, the upstream's CPU during that floor and the medium
    peak come from the runs against the replay (the aiohttp floor is a row, unjudged); large
    memory and dlt, which fetch from the sandbox, are compared with the sandbox sync."""
    verdicts, report = _verdicts(_floors_and_syncs(misses=[0, 0, 0]))

    assert verdicts["full sync wall / raw floor wall (medium)"] == ("1.88", "**met**")  # 15 / 8
    assert verdicts["full sync CPU / raw floor CPU (medium)"] == ("2.50", "**met**")  # 20 / 8
    upstream = "upstream CPU during the raw floor / floor client CPU (medium)"
    assert verdicts[upstream] == ("0.25", "**met**")  # 2 / 8
    assert not [figure for figure in verdicts if "aiohttp" in figure]
    assert verdicts["peak RSS, full sync (medium)"] == ("340 MiB", "**met**")
    assert verdicts["peak RSS large / medium"] == ("1.10", "**met**")  # 660 / the sandbox's 600
    assert verdicts["dlt / ductwork, wall (medium)"] == ("12.00", "**met**")  # 360 / 30
    row = next(line for line in report.body if line.startswith("| `ductwork sync`, full"))
    assert row.rstrip(" |").endswith("| 100 | 0")  # requests, then the replay's misses


def test_dlt_is_compared_with_the_syncs_run_beside_it_when_there_are_any() -> None:
    """The sync just before each dlt run, not the sandbox sync of a quarter hour earlier."""
    found = _floors_and_syncs(misses=[0, 0, 0])
    found.peer["medium"].append(Measured(390.0, 2000 * MIB, {"seconds": 380.0}))
    found.peer_ours = {"medium": [_sync(40.0, 400, 30.0), _sync(36.0, 400, 30.0)]}
    verdicts, report = _verdicts(found)
    assert verdicts["dlt / ductwork, wall (medium)"] == ("9.74", "**missed**")  # 370 / 38
    row = next(line for line in report.body if line.startswith("| `ductwork sync`, s"))
    assert "| 40.0 | 36.0 |" in row


def test_a_replay_miss_or_another_request_count_misses_every_verdict_against_the_floor() -> None:
    floor_verdicts = (
        "full sync wall / raw floor wall (medium)",
        "full sync CPU / raw floor CPU (medium)",
        "upstream CPU during the raw floor / floor client CPU (medium)",
    )
    missed, report = _verdicts(_floors_and_syncs(misses=[0, 2, 0]))
    assert [missed[figure][1] for figure in floor_verdicts] == ["**missed**"] * 3
    assert missed["full sync wall / raw floor wall (medium)"][0] == "1.88"  # the value stays
    row = next(line for line in report.body if line.startswith("| `ductwork sync`, full"))
    assert row.rstrip(" |").endswith("| 100 | 2")
    assert any("were not the floor's" in line for line in report.body)

    counted, _ = _verdicts(_floors_and_syncs(misses=[0, 0, 0], requests=99))
    assert [counted[figure][1] for figure in floor_verdicts] == ["**missed**"] * 3


def test_a_feed_pages_first_request_is_judged_against_twice_the_list_page() -> None:
    """The memory part's summary rows: the first request of a feed page (its answer not yet
    kept) against twice the current list page at most, the page the worker kept named a repeat
    request."""
    found = Findings()
    found.history = MemoryFindings(scale="medium", syncs=[5.0], size_with=13, size_without=10)
    found.history.latency = {
        "feed": (2.3, 1.8),
        "feed_first": (3.7, 1.8),  # 2.06: over twice
        "as_of_page": (1.0, 1.0),
        "as_of_lookup": (1.0, 1.0),
    }
    found.history.feed_first_pages = [4.0, 3.0]
    report = Report(found, argparse.Namespace(runs=3, large_runs=1, dlt_runs=1))
    report.history()
    verdicts = {figure: (value, target, word) for figure, value, target, word in report.summary}
    repeat = next(figure for figure in verdicts if "repeat request" in figure)
    first = next(figure for figure in verdicts if "first request" in figure)
    assert repeat.startswith("changes-feed page of 1000 changes, repeat request")
    assert verdicts[repeat] == ("1.28", "≤ 3", "**met**")
    assert verdicts[first] == ("2.06", "≤ 2", "**missed**")
    found.history.latency["feed_first"] = (3.6, 1.8)
    report = Report(found, argparse.Namespace(runs=3, large_runs=1, dlt_runs=1))
    report.history()
    assert [word for figure, _, _, word in report.summary if figure == first] == ["**met**"]


def test_the_results_head_says_how_many_dlt_runs_the_budget_left_of_those_asked() -> None:
    found = Findings()
    found.peer = {"medium": [object()]}  # one run made, where three were asked
    options = argparse.Namespace(
        runs=3, large_runs=1, dlt_runs=3, scales=["medium", "large"], wrk_threads=2,
        wrk_connections=32, serve_seconds=4, budget_min=25,
    )  # fmt: skip
    head = render(found, options, 60.0, "make bench").split("## Summary")[0]
    assert "dlt 1 of the 3 asked" in head


def test_answers_smaller_than_the_ceilings_copies_miss_the_serving_target() -> None:
    """A fast server whose statuses are right but whose answers are short of what the ceiling
    repeats (truncated, or another body) is no ground for a verdict."""
    good = {"200": 8000, "304": 1000, "404": 1000}

    def sized(rps: float, per_answer: int) -> dict:
        return {**run(rps, good), "requests": 10_000, "bytes": 10_000 * per_answer}

    ceiling = [sized(10_000, 1000)] * 3
    assert _report([sized(9000, 1100)] * 3, ceiling).summary[0][-1] == "**met**"
    short = _report([sized(9000, 900)] * 3, ceiling)  # 90 % of the ceiling's bytes
    assert short.summary[0][-1] == "**missed**"
    assert "answers not as the mix asks" in short.summary[0][1]


def test_the_incremental_step_table_shows_a_step_only_a_run_after_a_change_reports() -> None:
    """A run with nothing changed publishes nothing new, so its report has no publish step:
    the table still lists it, from the runs after a change, slowest first, every step."""
    quiet = [_sync(2.5, 300, 2.0) for _ in range(3)]
    changed = [_sync(4.5, 300, 4.0) for _ in range(3)]
    for index, one in enumerate(quiet):
        one.steps.update({f"step_{n}": 0.1 for n in range(11)}, catalog=0.2 + index / 100)
    for one in changed:
        one.steps.update({f"step_{n}": 0.1 for n in range(11)}, catalog=0.2, serving_snapshot=2.0)
    report = Report(Findings(), argparse.Namespace(runs=3, large_runs=1, dlt_runs=1))
    report.steps(quiet, changed)
    rows = [line for line in report.body if line.startswith("| ") and "step |" not in line][1:]
    assert rows[0] == "| serving_snapshot | 0.00 | 2.00 |"
    assert rows[1] == "| catalog | 0.21 | 0.20 |"
    assert len(rows) == 13  # every step, the eleven small ones too


def test_the_land_floor_adds_a_dagster_runs_cpu_and_judges_nothing() -> None:
    """The land-and-model floor is a reference: its rows and the least CPU ratio it leaves the
    sync's design (its CPU plus a no-op Dagster run's beyond the start-up floor) are shown, and
    no verdict is added for it."""
    found = _floors_and_syncs(misses=[0, 0, 0])
    found.land_floor = {"medium": [12.0, 13.0, 12.0]}
    found.floor_cpu["land"] = [16.0, 17.0, 18.0]
    found.land_floor_reports = {
        "medium": [
            {"fetch_land_s": 9.0, "model_s": 3.0, "fetch_land_cpu_s": 12.0, "model_cpu_s": 3.0}
        ]
        * 3
    }
    found.noop_run_cpu = [3.0, 3.5, 3.0]
    found.startup_floor_cpu = [1.0, 1.0, 1.0]
    verdicts, report = _verdicts(found)

    assert not [figure for figure in verdicts if "land" in figure]
    text = "\n".join(report.body)
    assert "| land-and-model floor: the raw client, bodies landed in DuckDB" in text
    assert "land-and-model floor / raw floor: CPU **2.12**, wall 1.50" in text  # 17 / 8, 12 / 8
    # 17 + (3 - 1) = 19 s of CPU, against the raw floor's 8
    assert "Land, model and that run: 19.0 s, **2.38 ×** the raw floor's CPU" in text
    assert "| model in SQL, CPU s | 3.0 | 3.0 | 3.0 | 3.0 |" in text
