"""Request ids, the JSON access log and Prometheus metrics, as one pure ASGI middleware.

The access log records method, path, status, duration, client, request id and worker pid:
never headers (keys live there) and never query strings or bodies (lead data could).

Under ``ductwork serve`` with several workers, each writes its metrics to files in the folder
``PROMETHEUS_MULTIPROC_DIR`` names (prometheus_client's multiprocess mode) and ``/metrics``
sums them, whichever worker answers. An app in a process without that variable keeps its
metrics in a registry of its own.
"""

from __future__ import annotations

import asyncio
import copy
import glob
import itertools
import json
import logging
import math
import os
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from uvicorn.config import LOGGING_CONFIG

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]

access_log = logging.getLogger("ductwork.access")
# On every answer: a browser must take each for the type it declares (JSON never run as a
# script or shown as a page).
NOSNIFF = (b"x-content-type-options", b"nosniff")


def shared_metrics() -> bool:
    """Whether this process's metrics live in prometheus_client's multiprocess files."""
    # prometheus_client chooses its value store once, when it is imported, from the variable;
    # asking the store it chose stays right even if the variable was set after that import.
    return bool(getattr(values.ValueClass, "_multiprocess", False))


# Latency buckets of ``ductwork_request_seconds`` (prometheus_client adds +Inf).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
# How long an answer's count may wait in this worker before prometheus_client holds it.
FLUSH_EVERY_S = 0.5


# A worker's metric file holds at least its header (the bytes in use) once written.
_HEADER_BYTES = 8


class SettledFilesCollector(MultiProcessCollector):
    """prometheus_client's multiprocess collector, passing over a metric file another worker
    has created but not yet written its header into: read in that moment, the file is empty and
    the library fails on it, so a ``/metrics`` answered while a worker starts was a 500."""

    def collect(self) -> Any:
        """The merged metrics of every worker's file that holds its header."""
        settled = []
        for path in glob.glob(os.path.join(self._path, "*.db")):
            try:
                if os.path.getsize(path) >= _HEADER_BYTES:
                    settled.append(path)
            except OSError:  # removed meanwhile: a worker that stopped
                continue
        return self.merge(settled, accumulate=True)


class Metrics:
    """The read API's metrics: summed over every worker's files in multiprocess mode,
    otherwise in a registry of their own (one per app).

    Answers are tallied in plain numbers and handed to prometheus_client in one batch at most
    ``FLUSH_EVERY_S`` after the first of them, and before this worker answers ``/metrics``:
    in multiprocess mode each of the library's increments takes a lock, asks the kernel for
    the pid and writes a shared page, three times an answer, which cost more than finding a
    SKU. Another worker's ``/metrics`` may therefore lag this one's by up to that delay, and
    a worker killed outright (no shutdown) loses at most that last delay's counts.
    """

    def __init__(self) -> None:
        self.shared = shared_metrics()
        self.registry = CollectorRegistry()
        if self.shared:
            SettledFilesCollector(self.registry)
        # In multiprocess mode the values are read back from the files, not from the metrics.
        own = None if self.shared else self.registry
        self.requests = Counter(
            "ductwork_requests", "Requests answered", ["family", "status"], registry=own
        )
        self.latency = Histogram(
            "ductwork_request_seconds", "Time to answer", ["family"], registry=own,
            buckets=LATENCY_BUCKETS,
        )  # fmt: skip
        # Set by whichever worker answers /metrics: the latest reading is the one to report.
        self.snapshot_age = Gauge(
            "ductwork_snapshot_age_seconds", "Age of the snapshot being served",
            registry=own, multiprocess_mode="livemostrecent",
        )  # fmt: skip
        self._bounds = (*LATENCY_BUCKETS, math.inf)
        self._tally = _Tally()
        # When the flush scheduled last should have run by (monotonic seconds), or None.
        self._flush_by: float | None = None

    def observe(self, family: str, status: int, seconds: float) -> None:
        """Count one answer and its latency (handed on with the next flush)."""
        self._tally.add(family, status, bisect_left(self._bounds, seconds), seconds)
        now = time.monotonic()
        # A flush is due soon: nothing to schedule, and no need to ask for the running loop
        # (Python 3.11 asks the kernel for the pid on every such call).
        if self._flush_by is not None and now < self._flush_by:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop here: nothing would run a later flush
            self.flush()
            return
        # Overdue means its loop stopped before running it: scheduled again on this one.
        self._flush_by = now + 2 * FLUSH_EVERY_S
        loop.call_later(FLUSH_EVERY_S, self.flush)

    def flush(self) -> None:
        """Hand every tallied answer to prometheus_client."""
        self._flush_by = None
        tally, self._tally = self._tally, _Tally()
        for (family, status), count in tally.answers.items():
            self.requests.labels(family, str(status)).inc(count)
        for family, counts in tally.buckets.items():
            timer = self.latency.labels(family)
            # A histogram has no public way to add many observations at once; its children
            # keep one value per bucket, and observe() adds 1 to one of them and the amount
            # to the sum, which is what this does n at a time (pinned by a test).
            for index, count in enumerate(counts):
                if count:
                    timer._buckets[index].inc(count)
            timer._sum.inc(tally.seconds[family])

    def close(self) -> None:
        """As the worker stops: flush, then drop its live gauge from the shared files (its
        counts stay)."""
        self.flush()
        if self.shared:
            mark_process_dead(os.getpid())


class _Tally:
    """Answers counted since the last flush: by (family, status), and per family by latency
    bucket, with the latencies' sum."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, int], int] = {}
        self.buckets: dict[str, list[int]] = {}
        self.seconds: dict[str, float] = {}

    def add(self, family: str, status: int, bucket: int, seconds: float) -> None:
        key = (family, status)
        self.answers[key] = self.answers.get(key, 0) + 1
        counts = self.buckets.get(family)
        if counts is None:
            counts = self.buckets[family] = [0] * (len(LATENCY_BUCKETS) + 1)
        counts[bucket] += 1
        self.seconds[family] = self.seconds.get(family, 0.0) + seconds


def serve_logging_config(level: str) -> dict[str, Any]:
    """uvicorn's ``log_config`` for ``ductwork serve``, applied in every worker it starts.

    At ``level`` (``info`` or ``debug`` for the access log): the JSON access log on stdout,
    one object a line and nothing else; ductwork's other logs and uvicorn's own on stderr.
    """
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["ductwork"] = {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    config["formatters"]["json_line"] = {"format": "%(message)s"}
    config["handlers"]["ductwork"] = {
        "class": "logging.StreamHandler", "formatter": "ductwork", "stream": "ext://sys.stderr",
    }  # fmt: skip
    config["handlers"]["ductwork_access"] = {
        "class": "logging.StreamHandler", "formatter": "json_line", "stream": "ext://sys.stdout",
    }  # fmt: skip
    level = level.upper()
    config["loggers"]["ductwork"] = {"handlers": ["ductwork"], "level": level, "propagate": False}
    config["loggers"][access_log.name] = {
        "handlers": ["ductwork_access"], "level": level, "propagate": False,
    }  # fmt: skip
    return config


def _family(path: str) -> str:
    parts = path.split("/", 2)
    return (
        parts[1]
        if len(parts) > 2 and parts[1] in {"products", "warehouse", "crm", "internal"}
        else "other"
    )


class RequestIds:
    """Fresh request ids: 64 random bits drawn once per process, then a count, 32 hex digits in
    all. As unique across workers as random ids, without a system call per request."""

    def __init__(self) -> None:
        self._reseed()
        # A forked worker draws its own bits: a copy of its parent's would repeat its ids.
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def next(self) -> str:
        """An id no other request of any process is likely to have."""
        return f"{self._prefix}{next(self._count):016x}"


request_ids = RequestIds()


class RequestTelemetry:
    """Adds ``X-Request-ID`` and ``X-Content-Type-Options: nosniff`` to every answer, logs it
    as JSON and counts it."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_of(scope["headers"])
        status = 500

        async def tagged_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = tagged([*message.get("headers", [])], request_id)
            await send(message)

        try:
            await self.app(scope, receive, tagged_send)
        finally:
            record_answer(self.metrics, scope, status, started, request_id)


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The request's own ``X-Request-ID`` when it is usable (printable, 1 to 128 characters),
    otherwise a fresh one."""
    incoming = ""
    for name, value in headers:
        if name == b"x-request-id":
            incoming = value.decode("latin-1")
            break
    return usable_request_id(incoming)


def usable_request_id(incoming: str) -> str:
    """``incoming`` (a request's first ``X-Request-ID``, empty when it has none) when it is
    usable (printable, 1 to 128 characters), otherwise a fresh id."""
    usable = 0 < len(incoming) <= 128 and incoming.isprintable()
    return incoming if usable else request_ids.next()


def tagged(headers: list[tuple[bytes, bytes]], request_id: str) -> list[tuple[bytes, bytes]]:
    """``headers`` (changed in place) with the request's id and ``nosniff``."""
    headers += ((b"x-request-id", request_id.encode()), NOSNIFF)
    return headers


def record_answer(
    metrics: Metrics, scope: Scope, status: int, started: float, request_id: str
) -> None:
    """Count an answer begun at ``started`` (``time.perf_counter``) and log it when the
    access log is on."""
    elapsed = time.perf_counter() - started
    metrics.observe(_family(scope["path"]), status, elapsed)
    if access_log.isEnabledFor(logging.INFO):  # skip building a line nobody logs
        access_log.info(json.dumps({
            "request_id": request_id, "method": scope["method"],
            "path": scope["path"][:512], "status": status,
            "ms": round(elapsed * 1000, 2), "client": (scope.get("client") or ["-"])[0],
            "pid": os.getpid(),
        }))  # fmt: skip
