"""The targets the results judge against, and the figures and checks of the runs that each
verdict rests on."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.findings import Findings
from bench.results.tables import median

# The suite's own wall time, in minutes.
BUDGET_MIN = 25

# The sync's targets: wall and CPU against the raw floor's (the least a client fetching the
# same requests spends), the upstream's CPU during that floor against the floor client's, peak
# memory, the no-change run against a no-op Dagster run, the run after 1 % changed against the
# no-change one, dlt against ductwork. The aiohttp floor stays a row of the tables, unjudged:
# a target set against it hid most of the sync's own cost (it is itself 3.5x the raw floor).
SYNC_WALL_TARGET = 2.0
SYNC_CPU_TARGET = 2.5
UPSTREAM_CPU_TARGET = 0.33
PEAK_RSS_TARGET_MIB = 350
LARGE_RSS_TARGET = 1.1
NO_CHANGE_TARGET = 1.25
CHANGED_SHARE_OF_FULL = 0.05
DLT_WALL_TARGET = 12.0
# Serving targets: the lookup mix's p99 paced at half ductwork's saturated rate against the
# ceiling's at that rate (cores shared), and ductwork's share of the ceiling's rate per mix.
PACED_P99_RATIO_TARGET = 1.5


def serving_share_target(mix: str) -> float:
    """The least share of the ceiling's rate ductwork must reach on the mix named ``mix``."""
    return 0.67 if mix.startswith("SKU") else 0.25


# A serving target is missed when a run lost more than this share of its requests...
LOSS_LIMIT = 0.001
# ...or when any answer's status is one the mix does not expect, or an expected status comes
# more often than its share of the mix by more than this share of the answers (the requests go
# round robin from a random start per thread, so the shares hold to well within it).
SHARE_SLACK = 0.01


def fetched_as_floor(found: Findings, scale: str) -> bool:
    """Whether the full syncs fetched what the floors fetched: no replay miss in any run of the
    floors or the syncs, and every sync's request count the floor's. Otherwise the floors are
    no reference, and every verdict against them is missed."""
    misses = found.replay_misses.get(scale, {})
    if any(sum(runs) for runs in misses.values()):
        return False
    counts = {run.requests for run in found.full.get(scale, [])}
    return counts == {found.floor_requests.get(scale)}


def paced_p99_ratio(found: Findings) -> float | None:
    """The paced lookup mix's median p99 over the ceiling's at the same rate, cores shared
    (None until both were measured)."""
    ours, ceiling = found.paced.get("shared"), found.paced.get("ceiling shared")
    if not (ours and ceiling):
        return None
    return median(r["p99_ms"] for r in ours) / median(r["p99_ms"] for r in ceiling)


def unexpected_answers(statuses: Mapping[str, int], expected: Mapping[str, float]) -> int:
    """How many answers the mix did not ask for: every answer with a status it never expects,
    and those of an expected status beyond its share (and the slack)."""
    total = sum(statuses.values())
    extra = 0
    for status, count in statuses.items():
        share = expected.get(status)
        allowed = 0 if share is None else math.floor((share + SHARE_SLACK) * total)
        extra += max(0, count - allowed)
    return extra


def answers_held(run: Mapping[str, Any], expected: Mapping[str, float]) -> bool:
    """Whether a load run's answers allow a verdict on its figures: no unexpected status, and
    no more than LOSS_LIMIT of its requests lost (wrk's socket errors, or the open-loop
    generator's requests left unanswered)."""
    statuses = run.get("statuses") or {}
    if not statuses:
        return False  # a run that counted no answer proves nothing
    answered = sum(statuses.values())
    lost = lost_requests(run)
    return unexpected_answers(statuses, expected) == 0 and lost <= LOSS_LIMIT * (answered + lost)


def lost_requests(run: Mapping[str, Any]) -> int:
    """The requests of a load run that got no answer."""
    return int(run.get("socket_errors", 0)) + int(run.get("unanswered", 0))


# ductwork's bytes per answer against the ceiling's (which repeats copies of its answers) in a
# mix: below this share, ductwork answered something smaller than what the ceiling copies.
BYTES_SHARE = 0.95


def answer_bytes(runs: Sequence[Mapping[str, Any]]) -> float | None:
    """The median of the runs' bytes read per answer (wrk's count, heads included); None when
    the runs did not count bytes."""
    sizes = [r["bytes"] / r["requests"] for r in runs if r.get("bytes") and r.get("requests")]
    return statistics.median(sizes) if sizes else None


def cpu_per_answer_runs(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each run's server CPU per answer in microseconds (``server_cpu_s`` over wrk's requests),
    for the runs that measured the server's CPU."""
    return [
        r["server_cpu_s"] / r["requests"] * 1e6
        for r in runs
        if r.get("server_cpu_s") is not None and r.get("requests")
    ]


def cpu_per_answer_us(runs: Sequence[Mapping[str, Any]]) -> float | None:
    """The median of the runs' server CPU per answer in microseconds; None when the runs did
    not measure the server's CPU."""
    spent = cpu_per_answer_runs(runs)
    return statistics.median(spent) if spent else None
