"""One queue for every way a run starts: the CLI, the daemon, and the read API's trigger.

``ductwork dev`` (the webserver and the daemon) runs on a data folder's instance on disk, as
operators run it. The read API's pim-image-sync trigger submits a run to that instance's queue
through the webserver while a ``ductwork sync`` runs from the CLI: the queued run starts only
when the warehouse is free, both succeed, and their times holding the warehouse never overlap.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import httpx
import pytest

from assets.warehouse_admission import HOLDING_MESSAGE
from ductwork.contract.paths import INTERNAL_PREFIX
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import free_socket, serving
from sandbox.server import SandboxHandle
from serve.app import create_app
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import dagster_dev, sync_env, sync_holding_the_warehouse

ROOT = Path(__file__).parent.parent
PIM_IMAGE_SYNC = f"{INTERNAL_PREFIX}/jobs/pim-image-sync"
START_LIMIT_S = 240
RUN_LIMIT_S = 300
DAEMON_LIMIT_S = 180  # two of run monitoring's 30 s passes and the slots' 30 s grace, with room


@dataclass(frozen=True)
class Queue:
    """``ductwork dev`` on a data folder: the webserver's URL, the folder and its env."""

    url: str
    home: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def queue(
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Queue]:
    """The Dagster webserver and daemon on a fresh data folder (schedules off, so that only
    the runs a test starts run)."""
    home = tmp_path_factory.mktemp("queue-home")
    env = {**sync_env(home, upstream, object_store, UPSTREAM_KEY), "DUCTWORK_SCHEDULES": "off"}
    with dagster_dev(env, START_LIMIT_S) as url:
        yield Queue(url, home, env)


def instance_of(home: Path) -> dg.DagsterInstance:
    """The data folder's Dagster instance, opened from its own dagster.yaml."""
    return dg.DagsterInstance.from_config(str(HomeSettings(home=home).dagster_home))


def wait_until_finished(home: Path, run_id: str, limit_s: float) -> dg.DagsterRun:
    """Poll the instance until the run has ended."""
    deadline = time.monotonic() + limit_s
    with instance_of(home) as instance:
        while time.monotonic() < deadline:
            run = instance.get_run_by_id(run_id)
            if run is not None and run.is_finished:
                return run
            time.sleep(0.5)  # polling for the run's end, not timing it
    raise AssertionError(f"run {run_id} did not finish within {limit_s} s")


def warehouse_interval(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float]:
    """When the run took the warehouse lease, and when the run ended."""
    taken = [
        entry.timestamp
        for entry in instance.all_logs(run_id)
        if entry.user_message == HOLDING_MESSAGE
    ]
    record = instance.get_run_record_by_id(run_id)
    assert taken and record is not None and record.end_time is not None, run_id
    return taken[0], record.end_time


def test_the_api_trigger_queues_a_run_that_waits_for_a_cli_sync_and_they_never_overlap(
    queue: Queue,
) -> None:
    key = KeyFile(HomeSettings(home=queue.home).keys_path).create("ops", ["internal"])
    app = create_app(
        HomeSettings(home=queue.home),
        ServeSettings(serve_pim_cooldown_s=3600, dagster_url=queue.url),
    )
    with sync_holding_the_warehouse(queue.env) as cli:
        with serving(app) as url:
            headers = {"Authorization": f"Bearer {key}"}
            first = httpx.get(url + PIM_IMAGE_SYNC, headers=headers, timeout=30)
            second = httpx.get(url + PIM_IMAGE_SYNC, headers=headers, timeout=30)
        output = cli.communicate(timeout=RUN_LIMIT_S)[0]
    assert cli.returncode == 0, output[-3000:]
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["success"] is True and body["status"] == "started"
    assert second.status_code == 429
    assert second.headers["content-type"] == "application/problem+json"
    assert 3500 < int(second.headers["retry-after"]) <= 3600

    queued = wait_until_finished(queue.home, body["jobId"], RUN_LIMIT_S)
    assert queued.job_name == "pim_image_sync"
    assert queued.status == dg.DagsterRunStatus.SUCCESS
    with instance_of(queue.home) as instance:
        cli_run = next(run for run in instance.get_runs() if run.job_name == "sync_all")
        cli_taken, cli_ended = warehouse_interval(instance, cli_run.run_id)
        api_taken, api_ended = warehouse_interval(instance, queued.run_id)
    assert cli_ended <= api_taken or api_ended <= cli_taken, "two runs held the warehouse"


def test_the_api_trigger_answers_503_in_its_family_style_when_the_queue_is_down(
    tmp_path: Path,
) -> None:
    with free_socket() as sock:  # a port nothing listens on once the socket closes
        port = sock.getsockname()[1]
    home = HomeSettings(home=tmp_path)
    key = KeyFile(home.keys_path).create("ops", ["internal"])
    app = create_app(home, ServeSettings(dagster_url=f"http://127.0.0.1:{port}"))
    with serving(app) as url:
        answers = [
            httpx.get(url + PIM_IMAGE_SYNC, headers={"Authorization": f"Bearer {key}"})
            for _ in range(2)
        ]
    for answer in answers:
        assert answer.status_code == 503
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["type"] == "/problems/unavailable"
    # Nothing was queued, so no cooldown began: the second call tried again (503, not 429).


def test_the_daemon_ends_a_killed_sync_and_frees_its_slots_with_no_other_run(
    queue: Queue,
) -> None:
    with sync_holding_the_warehouse(queue.env) as cli:
        os.killpg(cli.pid, signal.SIGKILL)  # mid-run: the run holds the warehouse
        cli.wait()
    with instance_of(queue.home) as instance:
        killed = next(
            run
            for run in instance.get_runs(filters=dg.RunsFilter(job_name="sync_all"))
            if run.status == dg.DagsterRunStatus.STARTED
        )
    # Run monitoring polls every 30 s and frees an ended run's slots 30 s after its end.
    ended = wait_until_finished(queue.home, killed.run_id, DAEMON_LIMIT_S)
    assert ended.status == dg.DagsterRunStatus.FAILURE
    deadline = time.monotonic() + DAEMON_LIMIT_S
    with instance_of(queue.home) as instance:
        while killed.run_id in instance.event_log_storage.get_concurrency_run_ids():
            assert time.monotonic() < deadline, "the daemon never freed the dead run's slots"
            time.sleep(1)  # polling for the daemon's next pass, not timing it
