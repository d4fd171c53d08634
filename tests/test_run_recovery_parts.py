"""Unit tests of the parts that recover dead runs: worker identity, the warehouse lease, the
launcher's health check and the instance's configuration (and what it sends to the event log).

These take shortcuts on purpose (an ephemeral instance, a lease held by a bare child process);
what operators run, ``ductwork sync`` on the data folder's instance, is tested in
tests/test_runs_on_the_instance.py, tests/resilience/test_crash_anywhere.py and
tests/test_run_queue.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.launcher import WorkerStatus

from assets.run_recovery import WORKER_TAG, recover_dead_runs
from ductwork.run_worker import RunWorker
from ductwork.warehouse.lease import WarehouseBusy, WarehouseLease
from pipelines.instance import INSTANCE_YAML, prepare_dagster_home
from pipelines.run_launcher import LocalRunLauncher
from sandbox.fault_settings import Faults
from tests.conftest import SEED, UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env

HOLD_LEASE = """
import sys, time
from pathlib import Path
from ductwork.warehouse.lease import WarehouseLease
lease = WarehouseLease(Path(sys.argv[1]))
assert lease.try_acquire("run-in-child")
print("held", flush=True)
time.sleep(600)
"""


def exited_worker() -> RunWorker:
    """The identity of a process that has already ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return RunWorker(RunWorker.current().host, child.pid, 1)


def lease_holder(path: Path) -> subprocess.Popen[str]:
    """A child process that takes the lease and keeps it until killed."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LEASE, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_worker_round_trips_through_its_tag_and_is_alive_only_while_it_runs() -> None:
    me = RunWorker.current()
    assert RunWorker.parse(str(me)) == me
    assert me.on_this_host and me.is_alive()
    assert not exited_worker().is_alive()
    assert RunWorker.parse("garbage") is None and RunWorker.parse(None) is None


def test_a_reused_process_id_does_not_pass_for_the_dead_worker() -> None:
    me = RunWorker.current()
    impostor = RunWorker(me.host, me.pid, me.started + 1)  # same pid, other start time
    assert not impostor.is_alive()


def test_the_lease_waits_for_its_holder_then_gives_up_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.lease"
    holder = lease_holder(path)
    try:
        reports: list[str] = []
        lease = WarehouseLease(path)
        with pytest.raises(WarehouseBusy, match=f"run-in-child \\(pid {holder.pid}"):
            lease.acquire("waiting-run", 1.2, lambda who, _: reports.append(str(who)))
        assert reports and "run-in-child" in reports[0]
        assert not lease.held
    finally:
        holder.kill()
        holder.wait()


def test_a_sigkilled_holder_leaves_the_lease_free_at_once(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.lease"
    holder = lease_holder(path)
    lease = WarehouseLease(path)
    assert not lease.is_free()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    waited = lease.acquire("next-run", 30, lambda *_: None)
    assert lease.held and waited < 1.0 and time.monotonic() - started < 1.0
    assert lease.holder() is not None and lease.holder().run_id == "next-run"  # type: ignore[union-attr]
    lease.release()
    assert lease.is_free()


def _started_run(instance: dg.DagsterInstance, tags: dict[str, str]) -> dg.DagsterRun:
    """A run recorded as started, with no process behind it but the one its tags name."""
    job = dg.GraphDefinition(name="empty", node_defs=[]).to_job()
    created = instance.create_run_for_job(job, tags=tags)
    instance.report_dagster_event(
        dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=created.job_name),
        run_id=created.run_id,
    )
    started = instance.get_run_by_id(created.run_id)
    assert started is not None and started.status == dg.DagsterRunStatus.STARTED
    return started


def test_the_launcher_reports_a_run_whose_worker_is_gone_as_failed() -> None:
    launcher = LocalRunLauncher()
    with dg.instance_for_test() as instance:
        dead = _started_run(instance, {WORKER_TAG: str(exited_worker())})
        alive = _started_run(instance, {WORKER_TAG: str(RunWorker.current())})
        unknown = _started_run(instance, {})
        assert launcher.supports_check_run_worker_health
        assert launcher.check_run_worker_health(dead).status == WorkerStatus.FAILED
        assert launcher.check_run_worker_health(alive).status == WorkerStatus.RUNNING
        assert launcher.check_run_worker_health(unknown).status == WorkerStatus.RUNNING


def test_recovery_ends_only_runs_whose_worker_is_gone() -> None:
    with dg.instance_for_test() as instance:
        dead = _started_run(instance, {WORKER_TAG: str(exited_worker())})
        alive = _started_run(instance, {WORKER_TAG: str(RunWorker.current())})
        ended = recover_dead_runs(instance, dg.get_dagster_logger())
        assert ended == [dead.run_id]
        assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
        assert instance.get_run_by_id(alive.run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]


def test_the_instance_config_turns_run_monitoring_on_and_an_existing_one_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # prepare_dagster_home selects its folder
    new = tmp_path / "new"
    prepare_dagster_home(new)
    assert (new / "dagster.yaml").read_text(encoding="utf-8") == INSTANCE_YAML
    with dg.DagsterInstance.from_config(str(new)) as instance:
        assert instance.run_monitoring_enabled
        assert isinstance(instance.run_launcher, LocalRunLauncher)
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0

    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    prepare_dagster_home(edited)
    assert (edited / "dagster.yaml").read_text(encoding="utf-8").startswith("telemetry")


def test_the_upstream_clients_retries_reach_the_runs_event_log(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """Through ``ductwork sync`` on the instance on disk, against an upstream answering 60 %
    of requests with a 5xx or a 429 (the catalog alone is a handful of requests)."""
    faults = Faults(error_rate=0.3, rate_limit_rate=0.3, retry_after_s=0, seed=3)
    with object_store.sandbox(SEED, "tiny") as upstream:
        upstream.state.faults = faults
        env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
        done = ductwork("sync", "--select", "group:catalog", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "retry" not in done.stdout  # the terminal shows steps, not every retry
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        (run,) = instance.get_runs()
        messages = [entry.user_message for entry in instance.all_logs(run.run_id)]
    assert any("rate limited (HTTP 429)" in message for message in messages)
    assert any(" retry 1 in " in message for message in messages)
