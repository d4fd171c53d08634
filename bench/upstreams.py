"""The upstreams the bench measures against, each in a process of its own: the sandbox of a
scale, its replay (the sandbox's answers recorded once, then written back from memory) and
moto's object store; and what a run cost the upstream."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.launching import stop
from bench.measuring import measured, running_cpu_s
from pipelines.processes import ProcessGroup, installed_command, wait_until_answering
from sandbox.admin_client import SandboxAdmin
from sandbox.local_server import free_socket

KEY = "bench-key"
BUCKET = "ductwork-bench"


@dataclass
class Upstream:
    """The sandbox (and moto) of one scale."""

    url: str
    s3_url: str
    scale: str
    startup_s: float
    pid: int

    def cpu_s(self) -> float:
        """The sandbox process's CPU time so far (user + system)."""
        return running_cpu_s(self.pid, "the sandbox")

    @property
    def admin(self) -> SandboxAdmin:
        """The sandbox's admin API."""
        return SandboxAdmin(self.url, KEY)

    def stats(self) -> dict[str, int]:
        """The sandbox's record counts."""
        return self.admin.stats()

    def mutate(self, counts: dict[str, int]) -> None:
        """Change that many records of each kind upstream."""
        self.admin.mutate(counts)


@dataclass
class Replay:
    """The replay upstream of one scale, answering from a recording of its sandbox: what the
    full syncs and the fetch floors run against."""

    url: str
    s3_url: str
    scale: str
    recording_s: float  # recording the sandbox's answers, until the replay answered
    pid: int
    recording: Path  # the answers it serves (removed when the replay stops)

    def cpu_s(self) -> float:
        """The replay process's CPU time so far (user + system)."""
        return running_cpu_s(self.pid, "the replay upstream")

    def stats(self) -> dict[str, Any]:
        """Requests answered so far, and misses: those it had no recorded answer for."""
        return httpx.get(f"{self.url}/_replay/stats", timeout=60).json()


class UpstreamProcess(Protocol):
    """An upstream in a process of its own, the sandbox or its replay: where a sync points, what
    it has answered so far and its CPU time."""

    url: str
    s3_url: str
    scale: str

    def cpu_s(self) -> float: ...

    def stats(self) -> dict[str, Any]: ...


def floor_command(url: str, client: str) -> list[str]:
    """The fetch floor of ``client`` (``raw`` or ``aiohttp``) against ``url``, as a command."""
    return [sys.executable, "-m", "bench.fetch_floor", "--url", url, "--api-key", KEY,
            "--client", client]  # fmt: skip


def land_floor_command(url: str, db: Path) -> list[str]:
    """The land-and-model floor against ``url``, landing into the DuckDB file ``db``."""
    return [sys.executable, "-m", "bench.land_floor", "--url", url, "--api-key", KEY,
            "--db", str(db)]  # fmt: skip


@contextmanager
def upstream(scale: str, group: ProcessGroup, s3_url: str) -> Iterator[Upstream]:
    """The sandbox of ``scale`` in its own process, stopped on exit."""
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    sandbox = group.start(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--port",
            str(port),
            "--scale",
            scale,
            "--api-key",
            KEY,
            "--s3-endpoint-url",
            s3_url,
            "--s3-bucket",
            BUCKET,
        ]
    )
    try:
        wait_until_answering(url + "/healthz", sandbox, timeout_s=1200)
        yield Upstream(url, s3_url, scale, time.perf_counter() - started, sandbox.pid)
    finally:
        stop(sandbox)


@contextmanager
def replaying(up: Upstream, group: ProcessGroup, work: Path, log: Path) -> Iterator[Replay]:
    """The replay upstream of ``up``'s scale in its own process, stopped on exit: every answer
    a full sync fetches recorded from ``up`` (``bench.fetch_floor --record``), then served."""
    recording = work / f"replay-{up.scale}.recording"
    started = time.perf_counter()
    measured([*floor_command(up.url, "raw"), "--record", str(recording)], log)
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    replay = group.start(
        [sys.executable, "-m", "sandbox.replay", "--recording", str(recording), "--port", str(port)]
    )
    try:
        wait_until_answering(url + "/healthz", replay, timeout_s=600)
        recorded_s = time.perf_counter() - started
        yield Replay(url, up.s3_url, up.scale, recorded_s, replay.pid, recording)
    finally:
        stop(replay)
        recording.unlink(missing_ok=True)


@dataclass(frozen=True)
class UpstreamCost:
    """What one run cost the upstream: requests, its CPU seconds meanwhile, and of a replay the
    requests it had no recorded answer for."""

    requests: int
    cpu_s: float
    misses: int = 0


def upstream_cost(up: UpstreamProcess, run: Any) -> tuple[Any, UpstreamCost]:
    """Run ``run()``; the upstream requests it made, the upstream's CPU time meanwhile and the
    replay's misses (0 from the sandbox)."""
    before, cpu = up.stats(), up.cpu_s()
    value = run()
    after = up.stats()
    return value, UpstreamCost(
        after["requests"] - before["requests"],
        up.cpu_s() - cpu,
        after.get("misses", 0) - before.get("misses", 0),
    )


def start_object_store(group: ProcessGroup) -> str:
    """moto's S3 server with the bench bucket and its manuals; its URL."""
    s3_port = free_socket().getsockname()[1]
    s3_url = f"http://127.0.0.1:{s3_port}"
    command = ["sh", "-c", 'exec "$0" "$@" >/dev/null 2>&1', installed_command("moto_server"),
               "-H", "127.0.0.1", "-p", str(s3_port)]  # fmt: skip
    wait_until_answering(s3_url, group.start(command))
    from assets.resources import ObjectStore
    from sandbox.server import seed_bucket

    s3 = ObjectStore(bucket=BUCKET, endpoint_url=s3_url).client()
    s3.create_bucket(Bucket=BUCKET)
    seed_bucket(s3, BUCKET, 1, 40)
    return s3_url
