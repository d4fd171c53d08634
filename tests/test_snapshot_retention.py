"""Old snapshots are deleted only once replaced for longer than the grace period."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ductwork import snapshots
from ductwork.settings import HomeSettings
from serve.live_snapshot import LiveSnapshot


def publish_fake(directory: Path, version: str, published_ago_s: float) -> Path:
    """A snapshot file published ``published_ago_s`` seconds ago, made current."""
    path = directory / f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    path.write_bytes(b"snapshot")
    moment = time.time() - published_ago_s
    os.utime(path, (moment, moment))
    (directory / snapshots.POINTER).write_text(path.name, encoding="utf-8")
    return path


def test_prune_keeps_the_newest_and_any_snapshot_replaced_within_the_grace_period(
    tmp_path: Path,
) -> None:
    # Published an hour apart, except the last two, a minute apart: the oldest two were
    # replaced long ago; the third-oldest was replaced only a minute ago.
    ages = {"v1": 4 * 3600, "v2": 3 * 3600, "v3": 2 * 3600, "v4": 60, "v5": 30, "v6": 0}
    files = {version: publish_fake(tmp_path, version, age) for version, age in ages.items()}

    removed = snapshots.prune(tmp_path, keep=2, grace_s=600)

    assert sorted(path.name for path in removed) == [files["v1"].name, files["v2"].name]
    remaining = sorted(path.name for path in tmp_path.glob(f"{snapshots.PREFIX}*"))
    assert remaining == [files[v].name for v in ("v3", "v4", "v5", "v6")]
    assert snapshots.current(tmp_path).path == files["v6"]


def test_prune_never_deletes_the_current_snapshot(tmp_path: Path) -> None:
    old = publish_fake(tmp_path, "v1", 5 * 3600)
    for version, age in (("v2", 4 * 3600), ("v3", 3 * 3600)):
        publish_fake(tmp_path, version, age)
    (tmp_path / snapshots.POINTER).write_text(old.name, encoding="utf-8")  # rolled back

    removed = snapshots.prune(tmp_path, keep=1, grace_s=0)

    assert old.exists() and old not in removed
    assert [path.name for path in removed] == [f"{snapshots.PREFIX}v2{snapshots.SUFFIX}"]


def test_prune_keeps_a_leased_snapshot_past_the_grace_period_until_it_is_let_go(
    tmp_path: Path,
) -> None:
    old = publish_fake(tmp_path, "v1", 3 * 3600)
    publish_fake(tmp_path, "v2", 2 * 3600)
    lease = snapshots.Lease(old)

    assert snapshots.prune(tmp_path, keep=1, grace_s=600) == []
    lease.release()
    assert snapshots.prune(tmp_path, keep=1, grace_s=600) == [old]


def test_a_serving_worker_leases_its_snapshot_and_lets_it_go_when_it_switches(
    synced_home: Path, tmp_path: Path
) -> None:
    published = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
    assert published is not None
    names = [f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}" for version in ("v1", "v2")]
    for name in names:
        shutil.copyfile(published.path, tmp_path / name)
    old = tmp_path / names[0]
    (tmp_path / snapshots.POINTER).write_text(names[0], encoding="utf-8")
    live = LiveSnapshot(tmp_path)
    assert live.load_now().version == "v1"
    (tmp_path / snapshots.POINTER).write_text(names[1], encoding="utf-8")  # a new publish

    assert snapshots.prune(tmp_path, keep=1, grace_s=0) == []  # still served
    assert live.load_now().version == "v2"
    assert snapshots.prune(tmp_path, keep=1, grace_s=0) == [old]


def test_prune_removes_a_killed_publish_copy_at_once_but_keeps_one_being_written(
    tmp_path: Path,
) -> None:
    publish_fake(tmp_path, "v1", 0)
    leftover = tmp_path / f"{snapshots.STAGING_PREFIX}v2{snapshots.SUFFIX}"
    leftover.write_bytes(b"half a copy")
    # A publish in progress holds the lock: its fresh copy is not a leftover.
    with snapshots._publishing(tmp_path):
        assert snapshots.prune(tmp_path, keep=1, grace_s=600) == []
    # Nobody publishes (the writer was killed): the copy goes, however young.
    assert snapshots.prune(tmp_path, keep=1, grace_s=600) == [leftover]
    assert not leftover.exists()
