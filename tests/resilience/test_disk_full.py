"""Disk full: the data folder on a small tmpfs that fills during a sync. The run fails with a
clear error; the snapshot published before keeps serving, whole and answering as it did before
the run; once space is back, the next run succeeds and the mirror equals the upstream."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer, resources_for
from tests.helpers.api import both_keys, compare_all, mirror_requests
from tests.helpers.sync import api_over, mutate, published_snapshot_is_whole

TMPFS_SIZE = "192m"  # a first sync needs about 60 MB at small scale
LEFT_FREE = 4 << 20  # what the ballast leaves: less than a snapshot needs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted on a fresh folder, unmounted afterwards."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not permitted'})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def run_sync(
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer
) -> dg.ExecuteInProcessResult:
    """One run of every stream and the publish.

    A shortcut on purpose (an ephemeral instance in this process): the test is about the
    assets' reads and writes; what runs do on the instance operators use (crashes, signals,
    waiting, the queue) is tested through ``ductwork sync`` processes elsewhere.
    """
    return dg.materialize(
        [*SYNCED_AND_PUBLISHED, *ALL_CHECKS],
        resources=resources_for(home, upstream.url, store),
        raise_on_error=False,
    )


def fill(disk: Path, leave: int) -> Path:
    """Write a ballast file that leaves ``leave`` bytes free."""
    ballast = disk / "ballast"
    free = shutil.disk_usage(disk).free
    with ballast.open("wb") as out:
        out.truncate(0)
        chunk = b"\0" * (1 << 20)
        for _ in range(max(0, free - leave) // len(chunk)):
            out.write(chunk)
    return ballast


@pytest.fixture(scope="module")
def upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of this module's own: the test changes its data, which other modules' shared
    upstream must never see."""
    with object_store.sandbox(808) as handle:
        yield handle


def test_disk_filling_during_a_sync_fails_clearly_and_the_last_snapshot_keeps_serving(
    small_disk: Path, upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    home = small_disk / "home"
    home.mkdir()
    assert run_sync(home, upstream, object_store).success
    snapshots = HomeSettings(home=home).snapshots_dir
    pointer_before = (snapshots / "CURRENT").read_text()
    # A copy of what is served now, off the small disk, to compare the answers with later.
    reference = tmp_path / "reference"
    shutil.copytree(snapshots, HomeSettings(home=reference).snapshots_dir)

    # Changes to write and publish (a run that changes nothing copies nothing).
    mutate(upstream, assets_updated=3_000, leads_added=500)
    # The key is made while there is room.
    key = KeyFile(HomeSettings(home=home).keys_path).create("tests", ["all"])
    ballast = fill(small_disk, LEFT_FREE)
    result = run_sync(home, upstream, object_store)
    assert not result.success
    failures = [
        event.event_specific_data.error.to_string()  # with its causes
        for event in result.all_events
        if event.is_step_failure
    ]
    assert any("space" in text.lower() for text in failures), failures
    assert (snapshots / "CURRENT").read_text() == pointer_before
    assert not list(snapshots.glob(".staging-*")), "a failed publish left its copy behind"
    published_snapshot_is_whole(home)
    with api_over(home, key) as api, api_over(reference) as before:
        requests = mirror_requests(upstream)
        compare_all(before, api, requests, (before.key, api.key))

    ballast.unlink()
    assert run_sync(home, upstream, object_store).success
    published_snapshot_is_whole(home)
    with api_over(home, key) as api:
        compare_all(upstream, api, mirror_requests(upstream), both_keys(upstream, api))
