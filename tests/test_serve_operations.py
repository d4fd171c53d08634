"""``ductwork serve`` started as users start it, with two worker processes: every worker writes
the JSON access log, and ``/metrics`` counts the requests of every worker, not only its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from pipelines.processes import PROJECT_ROOT, wait_until_answering
from sandbox.local_server import HOST, free_socket
from tests.conftest import home_with_published_snapshot

# Every counted request carries this query string; it must never reach the output.
QUERY = "count=1&page=2"
MIN_REQUESTS = 20
# Each request opens a new connection, which the kernel hands to one worker's socket by a hash
# of its addresses; past this many without both workers answering, the test fails, not loops.
MAX_REQUESTS = 400
METRICS_DEADLINE_S = 10.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServeRun:
    """What one ``ductwork serve`` run showed."""

    sent: int  # products requests, all answered 200
    key: str
    stdout: str
    stderr: str
    counted: float  # ductwork_requests_total of the products family, as /metrics last said
    returncode: int
    temp_dir: Path  # the run's TMPDIR


@contextmanager
def running_serve(
    home: Path, out: Path, err: Path, temp_dir: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ductwork serve`` with two workers on a free loopback port until the block ends, then
    SIGTERM to its session; yields its base URL and the process. Output goes to the files."""
    with free_socket() as probe:
        port = probe.getsockname()[1]
    env = {**os.environ, "DUCTWORK_HOME": str(home), "TMPDIR": str(temp_dir)}
    for name in ("DUCTWORK_LOG_LEVEL", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)  # the defaults are under test
    command = [sys.executable, "-m", "pipelines.cli", "serve"]
    command += ["--host", HOST, "--port", str(port), "--workers", "2"]
    with out.open("ab") as stdout, err.open("ab") as stderr:
        child = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=stdout, stderr=stderr,
            start_new_session=True,
        )  # fmt: skip
    try:
        url = f"http://{HOST}:{port}"
        wait_until_answering(f"{url}/healthz", child, timeout_s=90.0)
        yield url, child
    finally:
        with suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=STOP_TIMEOUT_S)


def _records(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of ``stdout``, one a line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _products_counted(metrics_text: str) -> float:
    """``ductwork_requests_total`` of the products family, summed over its status labels."""
    samples = re.findall(r"^ductwork_requests_total\{([^}]*)\} (\S+)$", metrics_text, re.M)
    return sum(float(value) for labels, value in samples if 'family="products"' in labels)


def _pids(run: ServeRun) -> set[int]:
    """The worker pids that answered the counted requests."""
    return {r["pid"] for r in _records(run.stdout) if r["path"] == paths.PRODUCTS_LIST}


@pytest.fixture(scope="module")
def serve_run(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> ServeRun:
    """One run: keyed products requests, each on a new connection, until both workers have
    answered some; then ``/metrics`` until it counts them all or its deadline passes."""
    home = tmp_path_factory.mktemp("serve-home")
    home_with_published_snapshot(synced_home, home)
    key = KeyFile(HomeSettings(home=home).keys_path).create("operations", ["catalog", "ops"])
    folder = tmp_path_factory.mktemp("serve-run")
    out, err, temp_dir = folder / "stdout", folder / "stderr", folder / "tmp"
    temp_dir.mkdir()
    sent, counted = 0, 0.0
    with running_serve(home, out, err, temp_dir) as (url, child):
        target = f"{url}{paths.PRODUCTS_LIST}?{QUERY}"
        headers = {"Authorization": f"Bearer {key}"}
        while sent < MAX_REQUESTS:
            answer = httpx.get(target, headers=headers, timeout=10.0)  # a connection of its own
            assert answer.status_code == 200, answer.text[:300]
            sent += 1
            if sent >= MIN_REQUESTS and sent % 10 == 0:
                records = _records(out.read_text(encoding="utf-8"))
                pids = {r["pid"] for r in records if r["path"] == paths.PRODUCTS_LIST}
                if len(pids) >= 2:
                    break
        # A worker counts a request just after sending its answer: the last one or two counts
        # may land a moment after the client has read the answer.
        deadline = time.monotonic() + METRICS_DEADLINE_S
        with httpx.Client(timeout=10.0) as client:
            while counted < sent and time.monotonic() < deadline:
                try:
                    metrics = client.get(f"{url}/metrics", headers=headers)
                except httpx.TransportError as error:
                    # Say what the server said meanwhile: a worker restarted, or one's error.
                    tail = err.read_text(encoding="utf-8")[-3000:]
                    message = f"/metrics failed: {error!r}; serve's stderr:\n{tail}"
                    raise AssertionError(message) from error
                counted = _products_counted(metrics.text)
    return ServeRun(
        sent=sent,
        key=key,
        stdout=out.read_text(encoding="utf-8"),  # complete: every worker has stopped
        stderr=err.read_text(encoding="utf-8"),
        counted=counted,
        returncode=child.returncode,
        temp_dir=temp_dir,
    )


def test_every_worker_writes_the_json_access_log_without_keys_or_query_strings(
    serve_run: ServeRun,
) -> None:
    records = _records(serve_run.stdout)  # stdout holds nothing but access-log lines
    counted = [r for r in records if r["path"] == paths.PRODUCTS_LIST]
    assert len(counted) == serve_run.sent
    for record in counted:
        assert record["method"] == "GET" and record["status"] == 200
        assert record["request_id"] and record["ms"] >= 0 and record["client"] == HOST
    assert len(_pids(serve_run)) == 2, "one worker answered everything"
    assert all("?" not in record["path"] for record in records)
    for text in (serve_run.stdout, serve_run.stderr):
        assert serve_run.key not in text
        assert "count=1" not in text and "page=2" not in text
        assert "Bearer" not in text and "authorization" not in text.lower()
    # uvicorn's own per-request line stays off: ours replaces it.
    assert f"GET {paths.PRODUCTS_LIST}" not in serve_run.stderr


def test_metrics_count_the_requests_of_every_worker(serve_run: ServeRun) -> None:
    # Both workers answered some of the requests: a worker reporting only its own registry
    # would count fewer than were sent, whichever of them answered /metrics.
    assert len(_pids(serve_run)) == 2
    assert serve_run.counted == serve_run.sent


def test_serve_stops_cleanly_and_removes_its_metrics_folder(serve_run: ServeRun) -> None:
    assert serve_run.returncode == 0, serve_run.stderr[-2000:]
    assert list(serve_run.temp_dir.iterdir()) == []
