"""Crash anywhere: a sync process killed with SIGKILL.

Mid-page and mid-write: killed after a seeded random number of upstream requests. The killed
runs share one data folder, as consecutive scheduled runs do; after them, one undisturbed run
must leave a mirror equal to the upstream, having resumed from the committed bookmarks rather
than starting over, and no published snapshot was ever torn.

The paged and cursor streams are the ones with something to resume: the lead cursor walk
(a cursor committed with every page) and the digital-asset walk (its progress committed with
every page, its bookmark with each finished walk).

Mid-publish: the publish makes no upstream requests, so those kills wait for an event of its
own instead: its staging copy (file and write-ahead log) growing past a seeded number of
bytes. The previous snapshot must stay current, whole and serving; the next run publishes a
whole snapshot equal to the upstream and removes the killed copies at once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from assets.warehouse import PAGE_WALK_STATE
from ductwork import snapshots
from ductwork.contract.encoding import loads
from ductwork.contract.paths import LEADS, WAREHOUSE_DIGITAL_ASSETS
from ductwork.settings import HomeSettings
from pipelines.definitions import SYNCED_AND_PUBLISHED
from sandbox.server import SandboxHandle
from tests import crash_sync
from tests.conftest import ObjectStoreServer, resources_for
from tests.differential import both_keys, compare_all, mirror_requests
from tests.test_sync_streams import api_over, metadata_by_asset, mutate

STREAMS = ("warehouse_digital_assets", "crm_leads", "serving_snapshot")
SOAK = bool(os.environ.get("DUCTWORK_SOAK"))
TRIALS = 30 if SOAK else 10
PUBLISH_TRIALS = 15 if SOAK else 5
RUN_LIMIT_S = 300  # a killed-or-finished run never takes this long, even on a busy machine


def published_snapshot_is_whole(home: Path) -> None:
    """The current snapshot, if any, opens read-only and carries its completion marker."""
    found = snapshots.current(HomeSettings(home=home).snapshots_dir)
    if found is None:
        return
    with duckdb.connect(str(found.path), read_only=True) as con:
        version = con.execute("SELECT version FROM snapshot_info").fetchall()
        assert version == [(found.version,)]
        con.execute("SELECT count(*) FROM serving_digital_assets").fetchall()


def killed_run(
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer, kill_now: Callable[[], bool]
) -> bool:
    """Start a sync process and SIGKILL it as soon as ``kill_now()`` holds; True when it
    finished before that."""
    # A forked child starts with everything imported: a trial costs the sync, not the imports.
    process = multiprocessing.get_context("fork").Process(
        target=crash_sync.run_quietly,
        args=(str(home), upstream.url, store.endpoint_url, store.bucket, list(STREAMS)),
    )
    process.start()
    deadline = time.monotonic() + RUN_LIMIT_S
    try:
        while process.is_alive() and not kill_now():
            assert time.monotonic() < deadline, "the sync process neither ran nor ended"
            time.sleep(0.002)  # polling for the event, not waiting for an outcome
        if not process.is_alive():
            return True
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        return False
    finally:
        process.join(timeout=RUN_LIMIT_S)


def after_requests(upstream: SandboxHandle, count: int) -> Callable[[], bool]:
    """True once the upstream has seen ``count`` more requests than now."""
    target = upstream.state.requests_seen + count
    return lambda: upstream.state.requests_seen >= target


def staging_bytes(snapshots_dir: Path) -> int:
    """Bytes of the publish's staging copy (its file and its write-ahead log); -1 if none."""
    sizes = []
    for path in snapshots_dir.glob(f"{snapshots.STAGING_PREFIX}*"):
        with contextlib.suppress(FileNotFoundError):  # renamed into place meanwhile
            sizes.append(path.stat().st_size)
    return sum(sizes) if sizes else -1


def staging_grown_past(snapshots_dir: Path, threshold: int) -> Callable[[], bool]:
    """True once a publish's staging copy exists and holds at least ``threshold`` bytes."""
    return lambda: staging_bytes(snapshots_dir) >= threshold


@pytest.fixture(scope="module")
def crash_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    with object_store.sandbox(606) as handle:
        yield handle


def test_sigkill_at_random_moments_then_one_run_resumes_and_equals_the_upstream(
    crash_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    rolls = random.Random(20261122)
    killed = 0
    changed_since_a_run_finished = len(crash_upstream.state.assets)
    for trial in range(TRIALS):
        # Fresh work for every run: about three pages of assets and a page of leads.
        mutate(crash_upstream, assets_updated=2_500, leads_added=800)
        changed_since_a_run_finished += 2_500
        # A first run asks about 36 requests; each later one 6 to 10.
        kill_after = rolls.randint(1, 30 if trial == 0 else 6)
        kill_now = after_requests(crash_upstream, kill_after)
        if killed_run(tmp_path, crash_upstream, object_store, kill_now):
            changed_since_a_run_finished = 0
        else:
            killed += 1
        published_snapshot_is_whole(tmp_path)
    assert killed >= TRIALS // 2, f"only {killed} of {TRIALS} runs were killed"

    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        cursor = con.execute(
            "SELECT bookmark FROM stream_state WHERE stream = 'crm_leads'"
        ).fetchall()
        bookmarks = dict(con.execute("SELECT stream, bookmark FROM stream_state").fetchall())
    asset_walk = loads(bookmarks.get(PAGE_WALK_STATE, "null"))
    asset_bookmark = loads(bookmarks.get("warehouse_digital_assets", "null"))
    assert cursor, "no killed run committed a lead cursor"
    committed = loads(cursor[0][0])
    after_cursor = sum(
        1
        for key in crash_upstream.state.leads.keys
        if key > (committed["CreatedDate"], committed["Id"])
    )
    resources = resources_for(tmp_path, crash_upstream.url, object_store)
    result = dg.materialize(SYNCED_AND_PUBLISHED, selection=list(STREAMS), resources=resources)
    assert result.success
    metadata = metadata_by_asset(result)
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
    published_snapshot_is_whole(tmp_path)
    assets_and_leads_equal_the_upstream(tmp_path, crash_upstream)


def assets_and_leads_equal_the_upstream(home: Path, upstream: SandboxHandle) -> None:
    """Every digital-asset and lead path the mirror serves answers as the upstream does."""
    with api_over(home) as api:
        requests = [
            request
            for request in mirror_requests(upstream)
            if request[0] in (WAREHOUSE_DIGITAL_ASSETS, LEADS)
        ]
        compare_all(upstream, api, requests, both_keys(upstream, api))


def assert_serves(home: Path, version: str) -> None:
    """The read API over ``home`` answers from the snapshot ``version``."""
    with api_over(home) as api:
        answer = httpx.get(
            f"{api.url}{WAREHOUSE_DIGITAL_ASSETS}",
            params={"count": 5},
            headers={"Authorization": f"Bearer {api.key}"},
            timeout=60,
        )
    assert answer.status_code == 200 and len(answer.json()["data"]) == 5
    current = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert current is not None and current.version == version


def test_sigkill_mid_publish_keeps_the_previous_snapshot_serving_and_the_next_run_cleans_up(
    crash_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    rolls = random.Random(20261123)
    snapshots_dir = HomeSettings(home=tmp_path).snapshots_dir
    assert killed_run(tmp_path, crash_upstream, object_store, lambda: False), "first publish"
    killed = 0
    for trial in range(PUBLISH_TRIALS):
        before = snapshots.current(snapshots_dir)
        assert before is not None
        # Upstream changes before every run, so each run has a new snapshot to publish.
        mutate(crash_upstream, assets_updated=500, leads_added=200)
        # The copy passes every size up to the last snapshot's (its WAL grows past it), so a
        # threshold below that is met mid-copy, early or late as the seed says.
        threshold = rolls.randint(1, before.path.stat().st_size * 9 // 10)
        kill_now = staging_grown_past(snapshots_dir, threshold)
        if killed_run(tmp_path, crash_upstream, object_store, kill_now):
            continue  # on a stalled machine the copy may finish between two looks
        killed += 1
        assert staging_bytes(snapshots_dir) >= 0, f"trial {trial}: no copy left, no mid-publish"
        assert snapshots.current(snapshots_dir) == before, f"trial {trial}: pointer moved"
        published_snapshot_is_whole(tmp_path)
        assert_serves(tmp_path, before.version)
    assert killed > PUBLISH_TRIALS // 2, f"only {killed} of {PUBLISH_TRIALS} publishes were killed"

    last = snapshots.current(snapshots_dir)
    assert last is not None and staging_bytes(snapshots_dir) >= 0
    resources = resources_for(tmp_path, crash_upstream.url, object_store)
    result = dg.materialize(SYNCED_AND_PUBLISHED, selection=list(STREAMS), resources=resources)
    assert result.success
    published = snapshots.current(snapshots_dir)
    assert published is not None and published.version != last.version
    published_snapshot_is_whole(tmp_path)
    assert_serves(tmp_path, published.version)
    # The killed publishes' copies went with this run's prune, not ten minutes later.
    assert staging_bytes(snapshots_dir) == -1
    assert metadata_by_asset(result)["serving_snapshot"]["pruned"] >= 1
    assets_and_leads_equal_the_upstream(tmp_path, crash_upstream)
