"""Crash anywhere: whole ``ductwork sync`` processes killed with SIGKILL on the data folder's own
Dagster instance, then one more ``ductwork sync`` that must finish and leave a mirror equal to
the upstream.

Every trial is the command an operator or a cron job runs: a process of its own (its own
session, killed as a group) with ``DUCTWORK_HOME`` the data folder the trials share, so the
warehouse, the snapshots and the Dagster instance on disk carry over from one trial to the
next, as they do between scheduled runs. A killed run never records its end: the instance keeps
it started and keeps the warehouse pool's slot its step claimed. The next run has to report it
failed and free that slot, or that run and every later one would wait for the slot forever.

- Mid-page and mid-write: killed after a seeded number of upstream requests. The next sync
  resumes from the committed bookmarks rather than starting over.
- While a step holds the pool: killed a seeded delay after the run took the warehouse lease
  or printed a seeded number of finished-step lines; only kills that left the killed run's
  pool slot claimed count.
- Mid-publish: the publish makes no upstream requests, so those kills wait for its staging copy
  (file and write-ahead log) to grow past a seeded number of bytes. The previous snapshot stays
  current, whole and serving; the next run publishes a whole snapshot and removes the killed
  copies at once.

After the kills of each test, one more ``ductwork sync`` exits 0 within ``RUN_LIMIT_S``, every
killed run is recorded as failed, no run holds or waits for a pool slot, and the mirror equals
the upstream.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from assets.ingest import WAREHOUSE_POOL
from ductwork import snapshots
from ductwork.contract.encoding import loads
from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS
from ductwork.settings import HomeSettings
from ductwork.warehouse.lease import lease_beside
from ductwork.warehouse.sync_state import PAGE_WALK
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import both_keys, compare_all, mirror_requests
from tests.helpers.cli import ROOT, sync_env
from tests.helpers.sync import api_over, mutate, published_snapshot_is_whole

# The streams with something to resume: the lead cursor walk (a cursor committed with every
# page) and the digital-asset walk (its progress committed with every page, its bookmark with
# each finished walk). ``ductwork sync`` adds the publish (serving_snapshot) to any selection.
SELECTED = ("warehouse_digital_assets", "crm_leads")
SYNC_COMMAND = [
    sys.executable, "-m", "pipelines.cli", "sync",
    *(argument for name in SELECTED for argument in ("--select", name)),
]  # fmt: skip
SOAK = bool(os.environ.get("DUCTWORK_SOAK"))
# Each trial is a whole process (a few seconds of imports before the sync begins).
REQUEST_TRIALS = 30 if SOAK else 5
POOL_KILLS = 15 if SOAK else 3
POOL_ATTEMPTS = 4 * POOL_KILLS  # a kill outside the pool's steps does not count
PUBLISH_TRIALS = 15 if SOAK else 3
RUN_LIMIT_S = 300  # a sync that neither ends nor meets its kill condition by then is wedged
TEST_LIMIT_S = 3_600 if SOAK else 900
POLL_S = 0.002  # between two looks at the kill condition; not a wait for an outcome

STEP_LINE = "  ok  "  # how ``ductwork sync`` starts the line of each step it finished


@dataclass(frozen=True)
class Running:
    """A sync process while it runs: its pid and the file its output goes to."""

    pid: int
    output: Path

    def step_lines(self) -> int:
        """How many finished-step lines it has printed so far."""
        text = self.output.read_text(encoding="utf-8", errors="replace")
        return sum(1 for line in text.splitlines() if line.startswith(STEP_LINE))


KillWhen = Callable[[Running], bool]
"""Whether to kill the running sync now."""


def never(running: Running) -> bool:
    """A sync left to finish."""
    return False


@dataclass(frozen=True)
class SyncEnded:
    """How one ``ductwork sync`` process ended."""

    killed: bool  # by SIGKILL; otherwise it exited on its own
    returncode: int
    run_id: str | None  # the run that took the warehouse lease in that process, if one did
    output: str  # what the process printed


@dataclass
class SyncTrials:
    """``ductwork sync`` processes, one after another, on one data folder."""

    home: Path
    env: dict[str, str]
    logs: Path
    started: int = 0
    killed_runs: list[str] = field(default_factory=list)

    def run(self, kill_when: KillWhen) -> SyncEnded:
        """Start ``ductwork sync`` in a session of its own and SIGKILL its process group as
        soon as ``kill_when`` holds. A sync that ends on its own must exit 0; one that
        is killed must have taken the warehouse lease (every condition here fires after it)."""
        self.started += 1
        log = self.logs / f"sync-{self.started}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                SYNC_COMMAND, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + RUN_LIMIT_S
            running = Running(process.pid, log)
            while process.poll() is None and not kill_when(running):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"ductwork sync neither ended nor met its kill condition within "
                        f"{RUN_LIMIT_S} s:\n{tail(log)}"
                    )
                time.sleep(POLL_S)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait(timeout=RUN_LIMIT_S)
        finally:
            if process.poll() is None:  # an assertion or an interrupt: leave nothing running
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=RUN_LIMIT_S)
        holder = lease_beside(HomeSettings(home=self.home).warehouse_path).holder()
        run_id = holder.run_id if holder is not None and holder.pid == process.pid else None
        killed = returncode == -signal.SIGKILL
        if killed and run_id is not None and run_status(self.home, run_id) is SUCCESS:
            # The kill landed after the run had recorded its success, while the process printed
            # its summary or shut down: no run was interrupted, so none is left to recover.
            return SyncEnded(False, returncode, run_id, tail(log))
        ended = SyncEnded(killed, returncode, run_id, tail(log))
        if ended.killed:
            assert run_id is not None, f"killed before it took the warehouse lease:\n{ended.output}"
            self.killed_runs.append(run_id)
        else:
            assert returncode == 0, f"ductwork sync exited {returncode}:\n{ended.output}"
        return ended

    def following_sync(self) -> str:
        """One undisturbed ``ductwork sync``: it exits 0 within ``RUN_LIMIT_S``; returns its
        run id."""
        ended = self.run(never)
        assert ended.run_id is not None, ended.output
        return ended.run_id


def tail(log: Path) -> str:
    """The last lines a sync process printed."""
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])


@pytest.fixture(scope="module")
def crash_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox upstream of this module's own: the trials change its data."""
    with object_store.sandbox(606) as handle:
        yield handle


@pytest.fixture
def trials(
    crash_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> SyncTrials:
    """Sync processes on a new data folder, against the crash upstream and the object store."""
    home = tmp_path / "home"
    logs = tmp_path / "logs"
    logs.mkdir()
    return SyncTrials(home, sync_env(home, crash_upstream, object_store, UPSTREAM_KEY), logs)


def after_requests(upstream: SandboxHandle, count: int) -> KillWhen:
    """True once the upstream has seen ``count`` more requests than now."""
    target = upstream.state.requests_seen + count
    return lambda running: upstream.state.requests_seen >= target


def after_step_lines_and_a_delay(home: Path, lines: int, seconds: float) -> KillWhen:
    """True ``seconds`` after the sync took the warehouse lease (``lines`` 0) or printed its
    ``lines``-th finished-step line, whichever is asked. The lease counts as taken once its
    holder record (run id and pid) in the lease file names the sync's process."""
    lease = lease_beside(HomeSettings(home=home).warehouse_path)
    since: list[float] = []

    def kill_now(running: Running) -> bool:
        if not since:
            holder = lease.holder()
            if holder is None or holder.pid != running.pid or running.step_lines() < lines:
                return False
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= seconds

    return kill_now


def staging_bytes(snapshots_dir: Path, besides: Collection[str] = ()) -> int:
    """Bytes of the publish's staging files (its copy and its write-ahead log) not named in
    ``besides``; -1 if there are none."""
    sizes = []
    for path in snapshots_dir.glob(f"{snapshots.STAGING_PREFIX}*"):
        if path.name in besides:
            continue
        with contextlib.suppress(FileNotFoundError):  # renamed into place meanwhile
            sizes.append(path.stat().st_size)
    return sum(sizes) if sizes else -1


def staging_names(snapshots_dir: Path) -> set[str]:
    """The staging files there are now: copies that killed publishes left behind."""
    return {path.name for path in snapshots_dir.glob(f"{snapshots.STAGING_PREFIX}*")}


def staging_grown_past(snapshots_dir: Path, threshold: int, besides: set[str]) -> KillWhen:
    """True once a new publish's staging copy (one not named in ``besides``) exists and holds
    at least ``threshold`` bytes. Each copy is named after its own version, so the copies
    earlier kills left behind never trigger it."""
    return lambda running: staging_bytes(snapshots_dir, besides) >= threshold


@contextlib.contextmanager
def instance_of(home: Path) -> Iterator[dg.DagsterInstance]:
    """The data folder's Dagster instance on disk, opened from the test process (only while no
    sync process runs)."""
    dagster_home = HomeSettings(home=home).dagster_home
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        yield instance


SUCCESS = dg.DagsterRunStatus.SUCCESS


def run_status(home: Path, run_id: str) -> dg.DagsterRunStatus | None:
    """The status the data folder's instance records for ``run_id``."""
    with instance_of(home) as instance:
        run = instance.get_run_by_id(run_id)
    return None if run is None else run.status


def pool_claims(home: Path) -> list[tuple[str, str]]:
    """Run id and step of every claimed slot of the warehouse pool."""
    with instance_of(home) as instance:
        info = instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL)
    return [(slot.run_id, slot.step_key) for slot in info.claimed_slots]


def run_metadata(home: Path, run_id: str) -> dict[str, dict]:
    """Each asset's materialisation metadata in the run ``run_id``, from the instance."""
    with instance_of(home) as instance:
        entries = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    found = {}
    for entry in entries:
        materialization = entry.asset_materialization
        assert materialization is not None
        values = {key: value.value for key, value in materialization.metadata.items()}
        found[materialization.asset_key.path[-1]] = values
    return found


def assert_dead_runs_recovered(trials: SyncTrials) -> None:
    """Every killed run is recorded as failed, every other run as succeeded (one run per sync
    process), and no run holds or waits for a pool slot."""
    with instance_of(trials.home) as instance:
        statuses = {run.run_id: run.status for run in instance.get_runs()}
        waiting = instance.event_log_storage.get_concurrency_run_ids()
        claimed = instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).claimed_slots
    assert len(statuses) == trials.started, statuses
    killed = {run_id: statuses.get(run_id) for run_id in trials.killed_runs}
    assert set(killed.values()) <= {dg.DagsterRunStatus.FAILURE}, killed
    others = {run_id: status for run_id, status in statuses.items() if run_id not in killed}
    assert set(others.values()) == {dg.DagsterRunStatus.SUCCESS}, others
    assert waiting == set(), f"runs still holding or waiting for pool slots: {waiting}"
    assert claimed == [], claimed


def assets_and_leads_equal_the_upstream(home: Path, upstream: SandboxHandle) -> None:
    """Every digital-asset and lead path the mirror serves answers as the upstream does."""
    with api_over(home) as api:
        requests = [
            request
            for request in mirror_requests(upstream)
            if request[0] in (DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS)
        ]
        compare_all(upstream, api, requests, both_keys(upstream, api))


def assert_serves(home: Path, version: str) -> None:
    """The read API over ``home`` answers from the snapshot ``version``."""
    with api_over(home) as api:
        answer = httpx.get(
            f"{api.url}{DATA_WAREHOUSE_DIGITAL_ASSETS}",
            params={"count": 5},
            headers={"Authorization": f"Bearer {api.key}"},
            timeout=60,
        )
    assert answer.status_code == 200 and len(answer.json()["data"]) == 5
    current = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert current is not None and current.version == version


@pytest.mark.timeout(TEST_LIMIT_S)
def test_syncs_killed_mid_page_resume_from_committed_bookmarks_and_the_next_sync_equals_upstream(
    crash_upstream: SandboxHandle, trials: SyncTrials
) -> None:
    rolls = random.Random(20261122)
    changed_since_a_run_finished = len(crash_upstream.state.assets)
    for trial in range(REQUEST_TRIALS):
        # Fresh work for every run: about three pages of assets and a page of leads.
        mutate(crash_upstream, assets_updated=2_500, leads_added=800)
        changed_since_a_run_finished += 2_500
        # A first run asks about 36 requests; each later one 6 to 10.
        kill_after = rolls.randint(1, 30 if trial == 0 else 6)
        if not trials.run(after_requests(crash_upstream, kill_after)).killed:
            changed_since_a_run_finished = 0
        published_snapshot_is_whole(trials.home)
    killed = len(trials.killed_runs)
    assert killed > REQUEST_TRIALS // 2, f"only {killed} of {REQUEST_TRIALS} syncs were killed"

    with duckdb.connect(str(HomeSettings(home=trials.home).warehouse_path)) as con:
        cursor = con.execute("SELECT value FROM sync_state WHERE key = 'crm_leads'").fetchall()
        bookmarks = dict(con.execute("SELECT key, value FROM sync_state").fetchall())
    asset_walk = loads(bookmarks.get("warehouse_digital_assets" + PAGE_WALK, "null"))
    asset_bookmark = loads(bookmarks.get("warehouse_digital_assets", "null"))
    assert cursor, "no killed run committed a lead cursor"
    committed = loads(cursor[0][0])
    after_cursor = sum(
        1
        for key in crash_upstream.state.leads.keys
        if key > (committed["CreatedDate"], committed["Id"])
    )

    metadata = run_metadata(trials.home, trials.following_sync())
    # The lead walk resumed at the committed cursor (plus at most one page read again).
    assert metadata["crm_leads"]["leads_new_or_resumed"] <= after_cursor + 1_000
    assert after_cursor + 1_000 < len(crash_upstream.state.leads.keys)
    # The asset page walk moves its bookmark once a whole walk proved consistent; a walk cut
    # short resumes at the page after its last committed one. Either way the rerun reads at
    # most what changed since the last finished run, plus one page.
    upserted = metadata["warehouse_digital_assets"]["rows_upserted"]
    assert upserted <= changed_since_a_run_finished + 1_000
    start = (
        None if asset_bookmark is None else [asset_bookmark["updatedAt"], asset_bookmark["assetId"]]
    )
    if asset_walk is not None and asset_walk["start"] == start:
        assert metadata["warehouse_digital_assets"]["resumed_after_page"] == asset_walk["pagesDone"]
    assert_dead_runs_recovered(trials)
    published_snapshot_is_whole(trials.home)
    assets_and_leads_equal_the_upstream(trials.home, crash_upstream)


@pytest.mark.timeout(TEST_LIMIT_S)
def test_syncs_killed_while_a_step_holds_the_warehouse_pool_never_wedge_the_next_sync(
    crash_upstream: SandboxHandle, trials: SyncTrials
) -> None:
    rolls = random.Random(20261124)
    held: list[tuple[str, str]] = []  # the slot (run, step) each counted kill left claimed
    moments: list[tuple[int, float, bool]] = []  # step lines, delay, killed: for a failure
    for _ in range(POOL_ATTEMPTS):
        if len(held) == POOL_KILLS:
            break
        mutate(crash_upstream, assets_updated=2_500, leads_added=800)
        # A run claims the pool for each step that writes the warehouse (the two streams and
        # the publish, a fraction of a second to a few seconds each), not for its check steps.
        # The seeded moment, counted from the lease or from the first to the fourth of its five
        # step lines, falls inside one of those steps or, now and then, outside them.
        lines, delay = rolls.randint(0, 4), rolls.uniform(0.0, 0.6)
        ended = trials.run(after_step_lines_and_a_delay(trials.home, lines, delay))
        moments.append((lines, round(delay, 3), ended.killed))
        published_snapshot_is_whole(trials.home)
        if not ended.killed:
            continue
        # Nothing ran since the kill: the dead run still holds the slot its step claimed, if
        # it was in such a step. Earlier dead runs hold none: the killed run had freed their
        # slots before it took the lease.
        claims = pool_claims(trials.home)
        assert {run_id for run_id, _ in claims} <= {ended.run_id}, claims
        held += claims
    assert len(held) == POOL_KILLS, (
        f"only {len(held)} of {len(trials.killed_runs)} kills in {trials.started} syncs "
        f"left a pool slot claimed: {held}; moments {moments}"
    )

    trials.following_sync()
    assert_dead_runs_recovered(trials)
    published_snapshot_is_whole(trials.home)
    assets_and_leads_equal_the_upstream(trials.home, crash_upstream)


@pytest.mark.timeout(TEST_LIMIT_S)
def test_syncs_killed_mid_publish_keep_the_previous_snapshot_serving_and_the_next_cleans_up(
    crash_upstream: SandboxHandle, trials: SyncTrials
) -> None:
    rolls = random.Random(20261123)
    snapshots_dir = HomeSettings(home=trials.home).snapshots_dir
    trials.run(never)  # the first publish
    for trial in range(PUBLISH_TRIALS):
        before = snapshots.current(snapshots_dir)
        assert before is not None
        # Upstream changes before every run, so each run has a new snapshot to publish.
        mutate(crash_upstream, assets_updated=500, leads_added=200)
        # The copy passes every size up to the last snapshot's (its WAL grows past it), so a
        # threshold below that is met mid-copy, early or late as the seed says.
        threshold = rolls.randint(1, before.path.stat().st_size * 9 // 10)
        earlier = staging_names(snapshots_dir)
        ended = trials.run(staging_grown_past(snapshots_dir, threshold, earlier))
        if not ended.killed:
            continue  # on a stalled machine the copy may finish between two looks
        assert staging_bytes(snapshots_dir, earlier) >= 0, f"trial {trial}: no new copy left"
        assert snapshots.current(snapshots_dir) == before, f"trial {trial}: pointer moved"
        # The publish step holds the warehouse pool for the whole copy; the dead run keeps it.
        assert pool_claims(trials.home) == [(ended.run_id, "serving_snapshot")], trial
        published_snapshot_is_whole(trials.home)
        assert_serves(trials.home, before.version)
    killed = len(trials.killed_runs)
    assert killed > PUBLISH_TRIALS // 2, f"only {killed} of {PUBLISH_TRIALS} publishes were killed"

    last = snapshots.current(snapshots_dir)
    assert last is not None and staging_bytes(snapshots_dir) >= 0
    metadata = run_metadata(trials.home, trials.following_sync())
    published = snapshots.current(snapshots_dir)
    assert published is not None and published.version != last.version
    published_snapshot_is_whole(trials.home)
    assert_serves(trials.home, published.version)
    # The killed publishes' copies went with this run's prune, not ten minutes later.
    assert staging_bytes(snapshots_dir) == -1
    assert metadata["serving_snapshot"]["pruned"] >= 1
    assert_dead_runs_recovered(trials)
    assets_and_leads_equal_the_upstream(trials.home, crash_upstream)
