"""The read API's metrics (serve/observability.py, ``Metrics``): answers tallied in the worker
and handed to prometheus_client in batches read exactly as one observation at a time would.

Unit tests on a single-process registry; the multi-worker path, through ``ductwork serve``
as the CLI starts it, is covered in test_serve_operations.py.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from serve import observability
from serve.observability import LATENCY_BUCKETS, Metrics

# Latencies around and on the bucket bounds, and one beyond the largest.
LATENCIES = [0.0004, 0.001, 0.0011, 0.003, 0.01, 0.2, 0.5, 2.5, 7.0]
ANSWERS = [("products", 200), ("products", 404), ("warehouse", 200), ("products", 200)]


def _one_at_a_time() -> bytes:
    """The exposition prometheus_client gives for the same answers observed one by one."""
    registry = CollectorRegistry()
    requests = Counter("ductwork_requests", "Requests answered", ["family", "status"],
                       registry=registry)  # fmt: skip
    latency = Histogram("ductwork_request_seconds", "Time to answer", ["family"],
                        registry=registry, buckets=LATENCY_BUCKETS)  # fmt: skip
    for family, status in ANSWERS:
        for seconds in LATENCIES:
            requests.labels(family, str(status)).inc()
            latency.labels(family).observe(seconds)
    return _without_created(generate_latest(registry))


def _without_created(exposition: bytes) -> bytes:
    """The exposition without its ``_created`` samples (the time each metric was made)."""
    lines = exposition.decode().splitlines()
    return "\n".join(line for line in lines if "_created" not in line).encode()


def _tallied(metrics: Metrics) -> None:
    for family, status in ANSWERS:
        for seconds in LATENCIES:
            metrics.observe(family, status, seconds)


def test_a_flushed_tally_reads_exactly_as_observing_each_answer() -> None:
    metrics = Metrics()
    assert not metrics.shared

    async def answer_then_flush() -> None:
        _tallied(metrics)
        metrics.flush()

    asyncio.run(answer_then_flush())
    ours = _without_created(generate_latest(metrics.registry))
    # Our registry also holds the snapshot-age gauge; the rest must match line for line.
    ours = b"\n".join(line for line in ours.splitlines() if b"snapshot_age" not in line)
    assert ours == _one_at_a_time()


def test_answers_wait_in_the_tally_until_the_scheduled_flush_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(observability, "FLUSH_EVERY_S", 0.0)  # due at the loop's next turn
    metrics = Metrics()

    def counted() -> float:
        value = metrics.registry.get_sample_value(
            "ductwork_requests_total", {"family": "products", "status": "200"}
        )
        return value or 0.0

    async def answer() -> tuple[float, float]:
        metrics.observe("products", 200, 0.002)
        metrics.observe("products", 200, 0.003)
        before = counted()
        for _ in range(3):  # call_later(0) runs within a turn or two of the loop
            await asyncio.sleep(0)
        return before, counted()

    before, after = asyncio.run(answer())
    assert (before, after) == (0.0, 2.0)
    # A later loop (the first one has stopped) gets a flush of its own.
    assert asyncio.run(answer()) == (2.0, 4.0)


def test_answers_counted_outside_an_event_loop_are_handed_on_at_once() -> None:
    metrics = Metrics()
    metrics.observe("crm", 401, 0.001)
    sample = {"family": "crm", "status": "401"}
    assert metrics.registry.get_sample_value("ductwork_requests_total", sample) == 1.0


def test_closing_hands_on_what_is_still_tallied() -> None:
    metrics = Metrics()

    async def answer() -> None:
        metrics.observe("internal", 200, 0.001)

    asyncio.run(answer())
    metrics.close()
    sample = {"family": "internal"}
    assert metrics.registry.get_sample_value("ductwork_request_seconds_count", sample) == 1.0
