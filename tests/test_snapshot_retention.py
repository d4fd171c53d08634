"""Old snapshots are deleted only once replaced for longer than the grace period, and their
record files with them."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from ductwork import snapshots
from ductwork.settings import HomeSettings, S3Settings
from ductwork.snapshots import folder, guard, record_files
from ductwork.snapshots.store import SnapshotStore, fetch_current
from ductwork.streams.registry import numbered_lists
from serve import record_file
from serve.live_snapshot import LiveSnapshot, load_state
from tests.conftest import ObjectStoreServer


def publish_fake(directory: Path, version: str, published_ago_s: float) -> Path:
    """A snapshot file published ``published_ago_s`` seconds ago, made current."""
    path = directory / f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    path.write_bytes(b"snapshot")
    guard.write_checksum(path)
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
    remaining = sorted(
        path.name for path in tmp_path.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}")
    )
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
    names = copies_of_the_synced_snapshot(synced_home, tmp_path, ["v1", "v2"])
    old = tmp_path / names[0]
    (tmp_path / snapshots.POINTER).write_text(names[0], encoding="utf-8")
    live = LiveSnapshot(tmp_path)
    assert live.load_now().version == "v1"
    (tmp_path / snapshots.POINTER).write_text(names[1], encoding="utf-8")  # a new publish

    assert snapshots.prune(tmp_path, keep=1, grace_s=0) == []  # still served
    old_records = record_files.record_file_names(old)
    assert live.load_now().version == "v2"
    # The old snapshot goes, and with it the record files written while it was served (kept
    # until then: a record file of a leased snapshot is never removed by a worker).
    pruned = snapshots.prune(tmp_path, keep=1, grace_s=0)
    assert pruned[0] == old
    assert {path.name for path in pruned[1:]} <= old_records
    assert not old.exists()


def test_prune_removes_a_killed_publish_copy_at_once_but_keeps_one_being_written(
    tmp_path: Path,
) -> None:
    publish_fake(tmp_path, "v1", 0)
    leftover = tmp_path / f"{snapshots.STAGING_PREFIX}v2{snapshots.SUFFIX}"
    leftover.write_bytes(b"half a copy")
    # A publish in progress holds the lock: its fresh copy is not a leftover.
    with folder.publishing_lock(tmp_path):
        assert snapshots.prune(tmp_path, keep=1, grace_s=600) == []
    # Nobody publishes (the writer was killed): the copy goes, however young.
    assert snapshots.prune(tmp_path, keep=1, grace_s=600) == [leftover]
    assert not leftover.exists()


def write_record_files(snapshot: Path) -> list[Path]:
    """A record file of every numbered list beside ``snapshot``, named as a serving worker
    names it (the content does not matter to pruning)."""
    paths = [
        snapshot.parent / record_files.record_file_name(snapshot, table)
        for table in numbered_lists()
    ]
    for path in paths:
        path.write_bytes(record_file.MAGIC + b"records")
    return paths


def record_files_in(directory: Path) -> set[str]:
    return {path.name for path in directory.glob(f"{record_files.RECORDS_PREFIX}*")}


def test_prune_removes_the_record_files_of_the_snapshots_it_deletes_and_no_others(
    tmp_path: Path,
) -> None:
    ages = {"v1": 5 * 3600, "v2": 4 * 3600, "v3": 3 * 3600, "v4": 2 * 3600, "v5": 60}
    files = {version: publish_fake(tmp_path, version, age) for version, age in ages.items()}
    records = {version: write_record_files(path) for version, path in files.items()}
    (tmp_path / snapshots.POINTER).write_text(files["v3"].name, encoding="utf-8")  # rolled back
    lease = snapshots.Lease(files["v1"])  # still served by a worker

    try:
        removed = snapshots.prune(tmp_path, keep=1, grace_s=600)
    finally:
        lease.release()

    # v5 is the newest, v4 was replaced a minute ago, v3 is current, v1 leased: only v2 goes.
    assert sorted(removed) == sorted([files["v2"], *records["v2"]])
    kept = {path.name for version in ("v1", "v3", "v4", "v5") for path in records[version]}
    assert record_files_in(tmp_path) == kept


def test_prune_removes_record_files_whose_snapshot_is_gone_or_was_changed_in_place(
    tmp_path: Path,
) -> None:
    current = publish_fake(tmp_path, "v2", 0)
    stale = write_record_files(current)
    current.write_bytes(b"snapshot, rewritten in place")  # its record files no longer match
    fresh = write_record_files(current)
    gone = publish_fake(tmp_path, "v1", 3600)
    orphans = write_record_files(gone)
    gone.unlink()  # deleted by hand, or by a release that left its record files behind
    (tmp_path / snapshots.POINTER).write_text(current.name, encoding="utf-8")

    removed = snapshots.prune(tmp_path, keep=3, grace_s=600)

    assert sorted(removed) == sorted([*stale, *orphans, guard.checksum_path(gone)])
    assert record_files_in(tmp_path) == {path.name for path in fresh}
    assert current.exists()


def test_prune_keeps_a_record_file_being_written_but_not_one_a_killed_writer_left(
    tmp_path: Path,
) -> None:
    pruned_meanwhile: list[Path] = []
    name, write = write_pruning_midway(tmp_path, pruned_meanwhile)

    written = write()

    assert pruned_meanwhile == []
    assert written.joined(0, 2) == b'{"n":1},{"n":2}'
    # A draft nobody is writing (its writer was killed): it goes at once, however young.
    left = tmp_path / f"{record_files.RECORDS_PREFIX}k1ll3d{record_files.RECORDS_PARTIAL}"
    left.write_bytes(record_file.MAGIC)
    assert snapshots.prune(tmp_path, keep=1, grace_s=600) == [left]
    assert record_files_in(tmp_path) == {name}


def test_prune_removes_a_record_file_draft_whose_writer_stalled_past_the_grace_period(
    tmp_path: Path,
) -> None:
    def untouched_for_an_hour(draft: Path) -> None:
        an_hour_ago = time.time() - 3600
        os.utime(draft, (an_hour_ago, an_hour_ago))

    pruned_meanwhile: list[Path] = []
    _, write = write_pruning_midway(tmp_path, pruned_meanwhile, untouched_for_an_hour)

    with pytest.raises(FileNotFoundError):  # its draft went: the write fails, pages are read
        write()

    assert [path.name.endswith(record_files.RECORDS_PARTIAL) for path in pruned_meanwhile] == [True]
    assert record_files_in(tmp_path) == set()


def test_a_stopped_worker_s_record_file_goes_with_its_snapshot(
    synced_home: Path, tmp_path: Path
) -> None:
    names = copies_of_the_synced_snapshot(synced_home, tmp_path, ["v1", "v2"])
    old = tmp_path / names[0]
    load_state(as_snapshot(old)).close()  # served v1 (writing its record file), then stopped
    written = record_files_in(tmp_path)
    assert written == {record_files.record_file_name(old, "serving_digital_assets")}
    (tmp_path / snapshots.POINTER).write_text(names[1], encoding="utf-8")  # a new publish

    removed = snapshots.prune(tmp_path, keep=1, grace_s=0)

    assert sorted(removed) == sorted([old, *(tmp_path / name for name in written)])
    assert record_files_in(tmp_path) == set()


def write_pruning_midway(
    folder: Path, pruned: list[Path], before_prune: Callable[[Path], None] = lambda draft: None
) -> tuple[str, Callable[[], record_file.RecordFile]]:
    """The record file name of a snapshot published in ``folder``, and a call that writes it in
    two batches, pruning the folder between them (after ``before_prune`` of the one draft
    being written) into ``pruned``."""
    snapshot = publish_fake(folder, "v1", 0)
    name = record_files.record_file_name(snapshot, "serving_digital_assets")

    def batches() -> Iterator[pa.Array]:
        yield pa.array(['{"n":1},'])
        (draft,) = folder.glob(f"*{record_files.RECORDS_PARTIAL}")
        before_prune(draft)
        pruned.extend(snapshots.prune(folder, keep=1, grace_s=600))
        yield pa.array(['{"n":2},'])

    return name, lambda: record_file.open_or_write(name, batches(), folder)


def copies_of_the_synced_snapshot(home: Path, folder: Path, versions: list[str]) -> list[str]:
    """Copy the snapshot the sync of ``home`` published into ``folder`` under each version;
    the copies' file names, in the order given."""
    published = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert published is not None
    names = [f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}" for version in versions]
    for name in names:
        shutil.copyfile(published.path, folder / name)
        guard.write_checksum(folder / name)
    return names


def as_snapshot(path: Path) -> snapshots.Snapshot:
    """The snapshot a file written by ``publish_fake`` stands for."""
    return snapshots.Snapshot(snapshots.version_of(path.name), path)


def store_at(object_store: ObjectStoreServer, prefix: str = "snapshots") -> SnapshotStore:
    """A snapshot store in a bucket of its own (created by the first publish)."""
    url = f"s3://retention-{uuid.uuid4().hex[:12]}/{prefix}"
    return SnapshotStore.connect(url, S3Settings(s3_endpoint_url=object_store.endpoint_url))


def stored_objects(store: SnapshotStore) -> dict[str, tuple[str, object]]:
    """Every object under the store's prefix: key -> (ETag, LastModified)."""
    listed = store._client.list_objects_v2(
        Bucket=store.location.bucket, Prefix=store.location.prefix
    )
    return {item["Key"]: (item["ETag"], item["LastModified"]) for item in listed["Contents"]}


def test_store_publishes_keep_every_version_replaced_within_the_grace_then_the_newest_three(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store)
    published = [
        publish_fake(tmp_path, f"2026010{index}T000000000000Z-abcdef", 0) for index in range(1, 6)
    ]
    for path in published:
        store.publish(as_snapshot(path))
    # Every publish pruned with the default grace: all five were replaced moments ago.
    snapshot_keys = [key for key in stored_objects(store) if key.endswith(snapshots.SUFFIX)]
    assert len(snapshot_keys) == 5

    removed = store.prune(keep=3, grace_s=0)

    assert sorted(removed) == [store.location.key(path.name) for path in published[:2]]
    assert store.read_pointer().name == published[-1].name


def test_store_prune_never_deletes_the_version_the_pointer_names(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store)
    old, *newer = [publish_fake(tmp_path, f"v{index}", 0) for index in range(1, 4)]
    for path in newer:
        store.publish(as_snapshot(path))
    store.publish(as_snapshot(old))  # rolled back to the oldest

    removed = store.prune(keep=1, grace_s=0)

    assert removed == [store.location.key(newer[0].name)]
    assert store.read_pointer().name == old.name


def test_a_confirm_only_store_publish_rewrites_the_pointer_and_nothing_else(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store)
    path = publish_fake(tmp_path, "v1", 0)
    first = store.publish(as_snapshot(path))
    before = stored_objects(store)

    again = store.publish(as_snapshot(path))

    after = stored_objects(store)
    assert first.uploaded and not again.uploaded
    assert after.keys() == before.keys()
    assert after[first.key] == before[first.key]  # the file itself untouched
    pointer = store.location.key(snapshots.POINTER)
    assert after[pointer][1] >= before[pointer][1]


def test_a_failed_upload_leaves_the_store_pointing_at_the_previous_snapshot(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store)
    good = publish_fake(tmp_path, "v1", 0)
    store.publish(as_snapshot(good))
    vanished = tmp_path / f"{snapshots.PREFIX}v2{snapshots.SUFFIX}"  # never written

    with pytest.raises(FileNotFoundError):
        store.publish(as_snapshot(vanished))

    assert store.read_pointer().name == good.name
    assert not any("v2" in key for key in stored_objects(store))


def test_a_replica_folder_downloads_a_version_once_and_dates_its_pointer_as_the_store_does(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store, prefix="deep/er")
    source, replica = tmp_path / "publisher", tmp_path / "replica"
    source.mkdir()
    path = publish_fake(source, "v1", 0)
    store.publish(as_snapshot(path))

    fetched = fetch_current(store, replica)
    inode = fetched.path.stat().st_ino
    again = fetch_current(store, replica)

    assert fetched.version == again.version == "v1"
    assert again.path.read_bytes() == path.read_bytes()
    assert again.path.stat().st_ino == inode  # not downloaded a second time
    assert snapshots.confirmed_at(replica) == store.read_pointer().written_at
    assert not list(replica.glob(f"{snapshots.STAGING_PREFIX}*"))


def test_a_store_pointer_naming_no_snapshot_file_is_refused_and_nothing_is_written(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    store = store_at(object_store)
    store.publish(as_snapshot(publish_fake(tmp_path, "v1", 0)))
    store._client.put_object(
        Bucket=store.location.bucket,
        Key=store.location.key(snapshots.POINTER),
        Body=b"../../outside.duckdb",
    )
    replica = tmp_path / "replica"

    with pytest.raises(ValueError, match="names no snapshot"):
        fetch_current(store, replica)
    assert not replica.exists()
