"""``ductwork sync`` runs as operators start them: processes on the Dagster instance under
DUCTWORK_HOME, stopped by signals, killed, and sharing one warehouse.

Every sync here is a ``python -m pipelines.cli`` process in a session of its own (so that a
test can always kill whatever it started) on a fresh data folder. The upstream answers every
request a few milliseconds late, so a full sync spends about twenty seconds fetching lead
details: long enough to signal it in the middle of that step, or to start a second sync that
has to wait. Tests find out where a sync is by reading the lines it prints, never by sleeping.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import dagster as dg
import pytest

from ductwork.run_worker import proc_stat
from ductwork.warehouse.lease import lease_beside
from sandbox.server import Faults, SandboxHandle, running_sandbox
from tests.conftest import SEED, UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ROOT, ductwork, sync_env

# Added to every upstream answer: a full small-scale sync then takes 25-35 s on two cores.
LATENCY_MS = 8.0
# Printed by the lead details step as it starts fetching: the sync is now inside its longest
# step, which lasts about twenty seconds, after several steps have finished.
MID_STEP = "  ..  fetching details of"
WAITING = "waiting for the warehouse"
WAITED = "the warehouse is this run's after waiting"
SUMMARY = re.compile(r"^run ([0-9a-f-]{36}): (\w+) in [0-9.]+ s$")
HOLDER = re.compile(r"held by run ([0-9a-f-]{36}) \(pid (\d+), since ")
STARTUP_S = 120.0  # from starting a sync to its first lines, with another sync busy
FULL_SYNC_S = 240.0  # a whole sync, however busy the machine is
STOP_S = 10.0  # from a stop signal to the process's exit


class SyncProcess:
    """A running ``ductwork`` command whose output lines are collected as they arrive."""

    def __init__(self, args: tuple[str, ...], env: dict[str, str]) -> None:
        self.args = args
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", *args],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        streams = ((self.process.stdout, self.stdout), (self.process.stderr, self.stderr))
        self._readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in streams
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        """The process id (the process runs the sync itself)."""
        return self.process.pid

    def _read(self, stream: IO[str], lines: list[str]) -> None:
        for line in stream:
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def output(self) -> str:
        """Everything printed so far, stdout then stderr."""
        with self._changed:
            return "\n".join([*self.stdout, "--- stderr ---", *self.stderr])

    def _ended(self) -> bool:
        return self.process.poll() is not None and not any(r.is_alive() for r in self._readers)

    def wait_until(self, found: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``found()`` (called with the lines locked) holds or the process has ended
        and said everything; True when it held."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not found():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ended():
                    return found()
                self._changed.wait(min(remaining, 0.5))
        return True

    def printed(self, text: str) -> str | None:
        """The first stdout line containing ``text``, if any yet."""
        with self._changed:
            return next((line for line in self.stdout if text in line), None)

    def wait_for_line(self, text: str, timeout: float = STARTUP_S) -> str:
        """The first stdout line containing ``text``, waiting for it up to ``timeout``."""
        if not self.wait_until(lambda: self.printed(text) is not None, timeout):
            raise AssertionError(
                f"`ductwork {' '.join(self.args)}` printed no line with {text!r} "
                f"within {timeout:.0f} s:\n{self.output()[-6000:]}"
            )
        line = self.printed(text)
        assert line is not None
        return line

    def exit_code_within(self, seconds: float) -> int:
        """The exit code, once the process ends (and its output is read) within ``seconds``."""
        try:
            code = self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"`ductwork {' '.join(self.args)}` still ran {seconds:.0f} s later:\n"
                f"{self.output()[-6000:]}"
            ) from None
        for reader in self._readers:
            reader.join(timeout=30)
        return code

    def finished_run(self) -> tuple[str, str]:
        """The run id and status from the summary the command printed as it ended."""
        with self._changed:
            found = [m.groups() for m in map(SUMMARY.match, self.stdout) if m]
        assert len(found) == 1, f"no single run summary in:\n{self.output()[-6000:]}"
        return found[0]

    def kill_group(self) -> None:
        """SIGKILL the process's whole session (whatever is left of it) and reap it."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def started(*args: str, env: dict[str, str]) -> Iterator[SyncProcess]:
    """``ductwork ARGS...`` started in a session of its own, killed with it on the way out."""
    command = SyncProcess(args, env)
    try:
        yield command
    finally:
        command.kill_group()


@contextmanager
def instance_at(home: Path) -> Iterator[dg.DagsterInstance]:
    """The Dagster instance a sync under ``home`` runs on, opened as the UI would open it."""
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        yield instance


def run_status(home: Path, run_id: str) -> dg.DagsterRunStatus:
    """The run's status as the instance records it."""
    with instance_at(home) as instance:
        run = instance.get_run_by_id(run_id)
    assert run is not None, f"the instance has no run {run_id}"
    return run.status


def runs_holding_slots(home: Path) -> set[str]:
    """Runs that hold or wait for a concurrency (pool) slot on the instance."""
    with instance_at(home) as instance:
        return set(instance.event_log_storage.get_concurrency_run_ids())


def lease_is_free(home: Path) -> bool:
    """Whether no process holds the warehouse lease under ``home``."""
    return lease_beside(home / "warehouse.duckdb").is_free()


def resource_errors(home: Path, run_id: str) -> str:
    """The errors, with their causes, of the run's failed resource set-ups, as recorded."""
    with instance_at(home) as instance:
        failures = instance.all_logs(run_id, of_type=dg.DagsterEventType.RESOURCE_INIT_FAILURE)
    errors = [entry.dagster_event.event_specific_data.error for entry in failures]
    return "\n".join(error.to_string() for error in errors if error is not None)


@contextmanager
def answering_promptly(upstream: SandboxHandle) -> Iterator[None]:
    """The upstream without its added latency inside the block."""
    slowed = upstream.state.faults
    upstream.state.faults = Faults()
    try:
        yield
    finally:
        upstream.state.faults = slowed


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used (fields 14 and 15 of its stat)."""
    fields = proc_stat(pid)
    assert fields is not None, f"process {pid} is gone"
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def holder_in(line: str) -> tuple[str, int]:
    """The run id and pid a waiting line names as the warehouse's holder."""
    match = HOLDER.search(line)
    assert match is not None, f"no holder named in {line!r}"
    return match.group(1), int(match.group(2))


@pytest.fixture(scope="module")
def slow_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A small-scale sandbox answering every request ``LATENCY_MS`` late."""
    with running_sandbox(
        seed=SEED,
        scale="small",
        api_key=UPSTREAM_KEY,
        faults=Faults(latency_ms=LATENCY_MS),
        s3_endpoint_url=object_store.endpoint_url,
        s3_bucket=object_store.bucket,
    ) as handle:
        yield handle


@pytest.fixture
def slow_env(
    slow_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> dict[str, str]:
    """The environment of a sync on a fresh data folder (``tmp_path``) from the slow upstream."""
    env = sync_env(tmp_path, slow_upstream, object_store, UPSTREAM_KEY)
    env.pop("DUCTWORK_WAREHOUSE_WAIT_S", None)
    return env


@pytest.mark.parametrize(
    ("stop", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_sigterm_stops_a_running_sync_within_ten_seconds_as_canceled_holding_nothing(
    stop: signal.Signals,
    exit_code: int,
    slow_upstream: SandboxHandle,
    slow_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """Signalled in the middle of a step, the sync exits with the shell's code for the signal
    within ten seconds; its run is canceled (not failed), it holds no pool slot and no lease,
    and the next sync runs."""
    with started("sync", env=slow_env) as sync:
        sync.wait_for_line("  ok  catalog")
        sync.wait_for_line(MID_STEP)
        os.kill(sync.pid, stop)
        assert sync.exit_code_within(STOP_S) == exit_code, sync.output()[-6000:]
        run_id, status = sync.finished_run()
    assert status == "canceled"
    assert run_status(tmp_path, run_id) == dg.DagsterRunStatus.CANCELED
    assert runs_holding_slots(tmp_path) == set()
    assert lease_is_free(tmp_path)

    with answering_promptly(slow_upstream):
        following = ductwork("sync", env=slow_env, timeout=FULL_SYNC_S)
    assert following.returncode == 0, following.stdout[-3000:] + following.stderr[-3000:]
    assert run_status(tmp_path, run_id) == dg.DagsterRunStatus.CANCELED


def test_a_second_sync_waits_for_the_first_cheaply_and_names_the_holder(
    slow_env: dict[str, str], tmp_path: Path
) -> None:
    """B, started while A runs, says at once that it waits for A's run and process, uses
    almost no CPU while it waits, and starts its steps only after A's run has ended."""
    with started("sync", env=slow_env) as first:
        first.wait_for_line("  ok  catalog")
        with started("sync", env=slow_env) as second:
            waiting = second.wait_for_line(WAITING)
            holder_run, holder_pid = holder_in(waiting)
            assert holder_pid == first.pid

            window_s = 6.0
            began, used_before = time.monotonic(), cpu_seconds(second.pid)
            second.wait_until(lambda: second.printed(WAITED) is not None, window_s)
            elapsed, used = time.monotonic() - began, cpu_seconds(second.pid) - used_before
            assert second.printed(WAITED) is None, "A ended before the window did; slow A down"
            assert second.process.poll() is None
            assert elapsed >= 5.0
            assert used / elapsed < 0.10, f"{used:.2f} s of CPU in {elapsed:.1f} s of waiting"

            assert first.exit_code_within(FULL_SYNC_S) == 0, first.output()[-6000:]
            assert second.exit_code_within(FULL_SYNC_S) == 0, second.output()[-6000:]
            assert second.printed(WAITED) is not None
            first_run, first_status = first.finished_run()
            second_run, second_status = second.finished_run()
    assert (first_status, second_status) == ("success", "success")
    assert holder_run == first_run

    with instance_at(tmp_path) as instance:
        first_record = instance.get_run_record_by_id(first_run)
        assert first_record is not None and first_record.end_time is not None
        step_starts = [
            entry.timestamp
            for entry in instance.all_logs(second_run, of_type=dg.DagsterEventType.STEP_START)
        ]
    assert step_starts, "the second run started no step"
    assert min(step_starts) >= first_record.end_time


def test_a_waiting_sync_gives_up_after_the_wait_limit_naming_the_holder(
    slow_env: dict[str, str], tmp_path: Path
) -> None:
    """With DUCTWORK_WAREHOUSE_WAIT_S=2, B fails while A still runs, and says which run holds
    the warehouse; A is not disturbed."""
    with started("sync", env=slow_env) as first:
        first.wait_for_line("  ok  catalog")
        impatient = {**slow_env, "DUCTWORK_WAREHOUSE_WAIT_S": "2"}
        with started("sync", env=impatient) as second:
            code = second.exit_code_within(STARTUP_S)
            assert first.process.poll() is None, "A ended first: B's limit was never tested"
            assert code == 1, second.output()[-6000:]
            gave_up = second.output()
            second_run, second_status = second.finished_run()
        assert first.exit_code_within(FULL_SYNC_S) == 0, first.output()[-6000:]
        first_run, first_status = first.finished_run()
    assert first_status == "success"
    assert second_status == "failure"
    assert f"held by run {first_run} (pid {first.pid}" in gave_up
    assert run_status(tmp_path, second_run) == dg.DagsterRunStatus.FAILURE
    # The error it gave up with, as the run's page shows it.
    error = resource_errors(tmp_path, second_run)
    assert "WarehouseBusy" in error
    assert f"still held by run {first_run} (pid {first.pid}" in error
    assert "DUCTWORK_WAREHOUSE_WAIT_S" in error
    assert runs_holding_slots(tmp_path) == set()


def test_a_sync_killed_while_holding_the_pool_does_not_block_the_next(
    slow_upstream: SandboxHandle, slow_env: dict[str, str], tmp_path: Path
) -> None:
    """A sync killed with SIGKILL in the middle of a step leaves its run started and its pool
    slot taken; the next sync ends that run as failed, frees the slot and completes."""
    with started("sync", env=slow_env) as killed:
        killed.wait_for_line(MID_STEP)
        os.kill(killed.pid, signal.SIGKILL)
        assert killed.exit_code_within(STOP_S) == -signal.SIGKILL
    with instance_at(tmp_path) as instance:
        (dead,) = instance.get_runs()
        slots = set(instance.event_log_storage.get_concurrency_run_ids())
    # What the kill left behind: the step's slot and a run that will never end by itself.
    assert dead.status == dg.DagsterRunStatus.STARTED
    assert slots == {dead.run_id}
    assert lease_is_free(tmp_path)  # the kernel dropped the flock with the process

    began = time.monotonic()
    with answering_promptly(slow_upstream), started("sync", env=slow_env) as following:
        assert following.exit_code_within(FULL_SYNC_S) == 0, following.output()[-6000:]
        ended = following.wait_for_line(f"run {dead.run_id} had died", timeout=0)
        _, status = following.finished_run()
    assert status == "success"
    assert "marked it ended" in ended
    assert time.monotonic() - began < FULL_SYNC_S
    assert run_status(tmp_path, dead.run_id) == dg.DagsterRunStatus.FAILURE
    assert runs_holding_slots(tmp_path) == set()
    assert lease_is_free(tmp_path)


def test_sigterm_while_waiting_for_the_warehouse_cancels_the_waiting_run(
    slow_env: dict[str, str], tmp_path: Path
) -> None:
    """B, waiting behind A, exits 143 within ten seconds of SIGTERM as a canceled run, and A
    runs on to success."""
    with started("sync", env=slow_env) as first:
        first.wait_for_line("  ok  catalog")
        with started("sync", env=slow_env) as second:
            second.wait_for_line(WAITING)
            os.kill(second.pid, signal.SIGTERM)
            assert second.exit_code_within(STOP_S) == 143, second.output()[-6000:]
            assert first.process.poll() is None, "A ended first: B was not waiting any more"
            second_run, second_status = second.finished_run()
        assert first.exit_code_within(FULL_SYNC_S) == 0, first.output()[-6000:]
        _, first_status = first.finished_run()
    assert first_status == "success"
    assert second_status == "canceled"
    assert run_status(tmp_path, second_run) == dg.DagsterRunStatus.CANCELED
    assert runs_holding_slots(tmp_path) == set()
    assert lease_is_free(tmp_path)


def test_usage_errors_are_one_line_with_exit_code_two(tmp_path: Path) -> None:
    """An unknown asset, group, job or stream is a one-line ``ductwork:`` error with exit code
    2 and no traceback, even with the upstream configured; ``--version`` names the version."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTWORK_")}
    env.update(
        DUCTWORK_HOME=str(tmp_path),
        DUCTWORK_UPSTREAM_URL="http://127.0.0.1:9",
        DUCTWORK_UPSTREAM_API_KEY="unused",
    )
    mistakes = {
        ("sync", "--select", "no_such_asset"): "'no_such_asset'",
        ("sync", "--select", "group:nope"): "'nope'",
        ("run-job", "no_such_job"): "'no_such_job'",
        ("sync", "--full-refresh", "nope"): "'nope'",
    }
    commands = {SyncProcess(args, env): named for args, named in mistakes.items()}
    try:
        for command, named in commands.items():
            code = command.exit_code_within(STARTUP_S)
            said = command.output()
            lines = [line for line in command.stderr if line.strip()]
            assert code == 2, said
            assert len(lines) == 1 and lines[0].startswith("ductwork: "), said
            assert named in lines[0]
            assert "Traceback" not in said
    finally:
        for command in commands:
            command.kill_group()

    version = ductwork("--version", env=env, timeout=STARTUP_S)
    assert version.returncode == 0
    assert version.stdout.startswith("ductwork ")
    assert len(version.stdout.strip().splitlines()) == 1


def test_sync_prints_a_line_per_step_and_a_summary_not_dagster_debug(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """A plain sync prints its finished steps and a summary and none of Dagster's DEBUG
    events; ``--verbose`` adds them."""
    env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
    plain = ductwork("sync", env=env, timeout=FULL_SYNC_S)
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-3000:]
    lines = plain.stdout.splitlines()
    assert any(line.startswith("  ok  catalog ") for line in lines)
    assert any(line.startswith("  ok  serving_snapshot ") for line in lines)
    assert [m.group(2) for m in map(SUMMARY.match, lines) if m] == ["success"]
    assert any(line.startswith("  rows changed: ") for line in lines)
    assert any(line.startswith("  snapshot: version ") for line in lines)
    assert "DEBUG" not in plain.stdout + plain.stderr

    verbose = ductwork("sync", "--verbose", env=env, timeout=FULL_SYNC_S)
    assert verbose.returncode == 0, verbose.stdout[-3000:] + verbose.stderr[-3000:]
    assert "DEBUG" in verbose.stdout + verbose.stderr
    assert "STEP_SUCCESS" in verbose.stdout + verbose.stderr
    assert any(line.startswith("  ok  catalog ") for line in verbose.stdout.splitlines())


SCHEDULE_STATUSES = (
    "from pipelines.definitions import defs\n"
    "for schedule in defs.schedules:\n"
    "    print(schedule.name, schedule.default_status.value)\n"
)


def schedule_statuses(env: dict[str, str]) -> dict[str, str]:
    """Each schedule's default status, as a fresh process importing the definitions sees it."""
    done = subprocess.run(
        [sys.executable, "-c", SCHEDULE_STATUSES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=STARTUP_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def test_schedules_run_by_default_and_stay_off_when_asked(tmp_path: Path) -> None:
    """Without DUCTWORK_SCHEDULES every schedule starts running; with ``off`` none does."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTWORK_")}
    env["DUCTWORK_HOME"] = str(tmp_path)
    by_default = schedule_statuses(env)
    switched_off = schedule_statuses({**env, "DUCTWORK_SCHEDULES": "off"})
    assert len(by_default) == 4
    assert set(by_default.values()) == {"RUNNING"}
    assert switched_off == dict.fromkeys(by_default, "STOPPED")
