"""Crash anywhere: a sync process killed with SIGKILL after a seeded random number of upstream
requests. The killed runs share one data folder, as consecutive scheduled runs do; after
them, one undisturbed run must leave a mirror equal to the upstream, having resumed from the
committed bookmarks rather than starting over, and no published snapshot was ever torn.

The paged and cursor streams are the ones with something to resume: the lead cursor walk
(a cursor committed with every page) and the digital-asset walk (its progress committed with
every page, its bookmark with each finished walk).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
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
TRIALS = 30 if os.environ.get("DUCTWORK_SOAK") else 10
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
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer, after_requests: int
) -> bool:
    """Start a sync process, SIGKILL it once the upstream has seen ``after_requests`` more
    requests; True when it finished before that."""
    state = upstream.state
    target = state.requests_seen + after_requests
    # A forked child starts with everything imported: a trial costs the sync, not the imports.
    process = multiprocessing.get_context("fork").Process(
        target=crash_sync.run_quietly,
        args=(str(home), upstream.url, store.endpoint_url, store.bucket, list(STREAMS)),
    )
    process.start()
    deadline = time.monotonic() + RUN_LIMIT_S
    try:
        while process.is_alive() and state.requests_seen < target:
            assert time.monotonic() < deadline, "the sync process neither ran nor ended"
            time.sleep(0.002)  # polling the sandbox's counter, not waiting for an outcome
        if not process.is_alive():
            return True
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        return False
    finally:
        process.join(timeout=RUN_LIMIT_S)


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
        if killed_run(tmp_path, crash_upstream, object_store, kill_after):
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
    chosen = [a for a in SYNCED_AND_PUBLISHED if a.key.path[-1] in STREAMS]
    resources = resources_for(tmp_path, crash_upstream.url, object_store)
    result = dg.materialize(chosen, resources=resources)
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
    with api_over(tmp_path) as api:
        requests = [
            request
            for request in mirror_requests(crash_upstream)
            if request[0] in (WAREHOUSE_DIGITAL_ASSETS, LEADS)
        ]
        compare_all(crash_upstream, api, requests, both_keys(crash_upstream, api))
