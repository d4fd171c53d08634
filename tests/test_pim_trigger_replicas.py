"""The pim-image-sync trigger takes its cooldown from the run queue itself: two ``ductwork serve``
processes with data folders of their own (replicas on two hosts, sharing nothing) and one
Dagster webserver agree on it, and a burst of calls over both queues exactly one run.

The webserver runs without a daemon, so queued runs stay queued: nothing but the trigger runs.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ductwork.contract.paths import PIM_IMAGE_SYNC
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from pipelines.processes import WORKSPACE, installed_command, wait_until_answering
from sandbox.local_server import HOST, free_socket
from serve.job_trigger import JOB_NAME
from tests.conftest import ROOT, home_with_published_snapshot
from tests.helpers.cli import stop_session
from tests.helpers.serve_process import serving_process

START_LIMIT_S = 240.0
COOLDOWN_S = 600
CALLS_PER_REPLICA = 4

_RUNS = """
query Runs($job: String!) { runsOrError(filter: {pipelineName: $job}) {
  ... on Runs { results { runId status } } } }
"""
_JOBS = (
    "query { repositoriesOrError { ... on RepositoryConnection { nodes { pipelines { name } } } } }"
)


@dataclass(frozen=True)
class Webserver:
    url: str

    def graphql(self, query: str, **variables: str) -> dict:
        body = {"query": query, "variables": variables}
        answer = httpx.post(f"{self.url}/graphql", json=body, timeout=60)
        answer.raise_for_status()
        return answer.json()["data"]

    def runs(self) -> dict[str, str]:
        """Status of every pim_image_sync run of the instance, by run id."""
        found = self.graphql(_RUNS, job=JOB_NAME)["runsOrError"]["results"]
        return {run["runId"]: run["status"] for run in found}


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webserver]:
    """``dagster-webserver`` over a fresh data folder's instance, as ``ductwork dev`` sets it
    up, without the daemon; ready once its code location lists the job."""
    home = tmp_path_factory.mktemp("queue")
    env = {
        **os.environ,
        "DUCTWORK_HOME": str(home),
        "DUCTWORK_SCHEDULES": "off",
        # The jobs' resources need them to be queued; no run is launched here to use them.
        "DUCTWORK_UPSTREAM_URL": "http://127.0.0.1:9",
        "DUCTWORK_UPSTREAM_API_KEY": "never-used",
    }
    dagster_home = HomeSettings(home=home).dagster_home
    prepared = subprocess.run(
        [sys.executable, "-c", "import sys, pathlib; from pipelines.instance import "
         "prepare_dagster_home as p; p(pathlib.Path(sys.argv[1]))", str(dagster_home)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    with free_socket() as sock:
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [installed_command("dagster-webserver"), "-w", str(WORKSPACE), "-h", HOST, "-p",
         str(port)],
        cwd=ROOT, env={**env, "DAGSTER_HOME": str(dagster_home)}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        server = Webserver(f"http://{HOST}:{port}")
        wait_until_answering(f"{server.url}/server_info", process, START_LIMIT_S)
        deadline = time.monotonic() + START_LIMIT_S
        while not any(
            job["name"] == JOB_NAME
            for node in server.graphql(_JOBS)["repositoriesOrError"].get("nodes", [])
            for job in node["pipelines"]
        ):
            assert time.monotonic() < deadline, "the code location never listed the job"
            time.sleep(0.5)  # polling for the code location to load, not timing it
        yield server
    finally:
        stop_session(process, grace_s=30)


def replica_home(synced_home: Path, home: Path) -> str:
    """A data folder of its own with the published snapshot; a key of the internal scope."""
    home_with_published_snapshot(synced_home, home)
    return KeyFile(HomeSettings(home=home).keys_path).create("jobs", ["internal"])


async def burst(calls: list[tuple[str, str]]) -> list[httpx.Response]:
    """Every (url, key) call at once."""
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(
            *(
                client.get(url + PIM_IMAGE_SYNC, headers={"Authorization": f"Bearer {key}"})
                for url, key in calls
            )
        )


def test_two_replicas_agree_on_the_cooldown_and_a_burst_over_both_queues_one_run(
    webserver: Webserver, synced_home: Path, tmp_path: Path
) -> None:
    keys = [replica_home(synced_home, tmp_path / name) for name in ("first", "second")]
    settings = {"DUCTWORK_DAGSTER_URL": webserver.url, "DUCTWORK_SERVE_PIM_COOLDOWN_S": "600"}
    with (
        serving_process(tmp_path / "first", 2, settings) as first,
        serving_process(tmp_path / "second", 2, settings) as second,
    ):
        urls = [first.url, second.url]
        answers = asyncio.run(
            burst([(url, key) for url, key in zip(urls, keys, strict=True)] * CALLS_PER_REPLICA)
        )
        started = time.time()
        later = asyncio.run(burst(list(zip(urls, keys, strict=True))))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] + [429] * (2 * CALLS_PER_REPLICA - 1), (statuses, answers[0].text)
    job_id = next(answer.json()["jobId"] for answer in answers if answer.status_code == 200)
    for refused in [a for a in answers if a.status_code == 429] + later:
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert COOLDOWN_S - 60 <= int(refused.headers["retry-after"]) <= COOLDOWN_S
    # Both replicas count from the same run: their waits differ by the time between the calls.
    waits = [int(answer.headers["retry-after"]) for answer in later]
    assert abs(waits[0] - waits[1]) <= 2 + (time.time() - started), waits
    runs = webserver.runs()
    assert runs[job_id] == "QUEUED"
    assert all(status == "CANCELED" for run, status in runs.items() if run != job_id), runs
