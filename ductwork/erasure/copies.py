"""Every published copy of a forgotten record, removed: the step of ``ductwork forget`` that
follows the warehouse's erasure and the publish of a snapshot that no longer holds the keys.

What may still hold them, beside the new current snapshot (which must not: refused first):

- older snapshot files in the snapshots' folder, with their checksums, record files and
  change files;
- change files of remaining publishes, the current one's included: a publish carries the last
  publish's entries on, so the current publish's file of the stream is rewritten from the
  current snapshot's log (another publish's is removed: a walk pinned to it reads the history);
- snapshots rebuilt for the past (``.past/``), with their record files;
- the object store's snapshot files (and checksums) of older publishes.

Whether a file holds a key is asked of the file itself, read-only: the text columns named as
the stream's key columns in every schema (current tables, their versions, a stream's own
history), its keyless tables' text, and the changes feed's log and state. A file that cannot be
read is taken to hold it. Then the folder's erasure marker is rewritten, and the store's: every
serving worker drops what it keeps of earlier publishes, and every replica the files its store
no longer names. Nothing here logs a key or a record.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path

import duckdb

from ductwork import serving_workers, snapshots
from ductwork.erasure import local_files
from ductwork.history import change_file_names
from ductwork.history.change_files import ChangeFile
from ductwork.settings import HomeSettings, S3Settings, SnapshotStoreSettings, load
from ductwork.snapshots import guard, record_files
from ductwork.snapshots.store import SnapshotStore
from ductwork.streams.model import Stream
from ductwork.streams.registry import stream_named
from warehouse_sql import fill, section

log = logging.getLogger("ductwork")
SERVED_WITHIN_S = 60.0  # for the local read-API workers to serve the new current snapshot
COUNTS = ("snapshot_files", "record_files", "change_files", "past_rebuilds", "store_objects")


class StillHeld(RuntimeError):
    """The current snapshot still holds a key: the warehouse's erasure and its publish come
    first."""


def erase_copies(
    settings: HomeSettings,
    stream: str,
    keys: Sequence[str],
    store: SnapshotStore | None = None,
) -> dict[str, int]:
    """Remove every copy but the current snapshot that holds any of ``keys`` of ``stream``:
    snapshot files, their record and change files, rebuilt past snapshots, the store's objects
    (``store``, else the one ``DUCTWORK_SNAPSHOT_STORE`` names, if any); then mark the erasure
    for the serving workers and the replicas. The counts of what was removed, by kind.

    StillHeld (nothing removed) when the current snapshot holds a key."""
    found = stream_named(stream)
    wanted = list(dict.fromkeys(keys))
    counts = Counter(dict.fromkeys(COUNTS, 0))
    folder = settings.snapshots_dir
    live = snapshots.current(folder)
    if not wanted or live is None:
        return dict(counts)
    if holds(live.path, found, wanted, unreadable=False):
        raise StillHeld(
            f"the current snapshot still holds {stream} records to forget: erase them from "
            "the warehouse and publish first"
        )
    # The local workers swap the new current snapshot in first (a worker still serving an
    # older one answers the past from its history), within a bound: one stuck is not waited for.
    late = serving_workers.wait_until_served(folder, live.version, SERVED_WITHIN_S)
    if late:
        log.warning(
            "%d read-API workers do not serve the current snapshot yet; erasing all the same",
            len(late),
        )
    removed_names = _remove_snapshots(folder, live, found, wanted, counts)
    _clean_change_files(folder, live, found, wanted, counts)
    with local_files.no_rebuild(folder):
        for rebuilt in local_files.rebuilt_snapshots(folder):
            if holds(rebuilt, found, wanted):
                _count(local_files.remove_rebuilt(rebuilt), counts, "past_rebuilds")
    store = store if store is not None else _configured_store()
    token = local_files.write_marker(folder)
    if store is not None:
        counts["store_objects"] += _erase_from_store(store, folder, removed_names, found, wanted)
        store.write_erasure_marker(token)
    log.info(
        "erased the copies of %d %s records: %s",
        len(wanted),
        stream,
        ", ".join(f"{kind} {counts[kind]}" for kind in COUNTS),
    )
    return dict(counts)


def holds(path: Path, stream: Stream, keys: Sequence[str], unreadable: bool = True) -> bool:
    """Whether the snapshot file ``path`` (published or rebuilt) holds any of ``keys`` of
    ``stream``; a file that cannot be read counts as ``unreadable`` says (False: its error
    is raised)."""
    try:
        with guard.open_locked(path) as con:
            return _holds(con, stream, list(keys))
    except duckdb.Error:
        if not unreadable:
            raise
        return True


def _holds(con: duckdb.DuckDBPyConnection, stream: Stream, keys: list[str]) -> bool:
    names = sorted({table.key[0] for table in stream.tables if table.key})
    columns = con.execute(section("erased_copies", "key_columns"), [names]).fetchall()
    for schema, table, column in columns:
        statement = fill(
            section("erased_copies", "holds_key"), schema=schema, table=table, column=column
        )
        if con.execute(statement, [keys]).fetchall()[0][0]:
            return True
    for keyless in (table.name for table in stream.tables if not table.key):
        for name in (keyless, keyless + "__since"):
            found = con.execute(section("erased_copies", "keyless_columns"), [name]).fetchall()
            for schema, column in found:
                statement = fill(
                    section("erased_copies", "holds_text"), schema=schema, table=name, column=column
                )
                if con.execute(statement, [keys]).fetchall()[0][0]:
                    return True
    if con.execute(section("erased_copies", "has_feed")).fetchall()[0][0]:
        asked = [stream.name, keys, stream.name, keys]
        return bool(con.execute(section("erased_copies", "feed_holds_key"), asked).fetchall()[0][0])
    return False


def _remove_snapshots(
    folder: Path, live: snapshots.Snapshot, stream: Stream, keys: list[str], counts: Counter
) -> set[str]:
    """Remove every older snapshot file holding a key, with its companions; their names."""
    removed = set()
    for path in sorted(folder.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}")):
        if path == live.path or not holds(path, stream, keys):
            continue
        gone = local_files.remove_snapshot(path)
        if path in gone:
            removed.add(path.name)
        _count(gone, counts)
    return removed


def _clean_change_files(
    folder: Path, live: snapshots.Snapshot, stream: Stream, keys: list[str], counts: Counter
) -> None:
    """Remove the stream's change files holding a key, but the current publish's, which is
    written anew from the current snapshot (carried on from the last publish's file when that
    one is left, as it holds no key; else from the log)."""
    rewrite = False
    suffix = f".{stream.name}"
    for path in sorted(folder.glob(f"{change_file_names.CHANGES_PREFIX}*{suffix}")):
        opened = ChangeFile.open(path)
        if opened is not None and not _lists_any(opened, keys):
            continue
        if path.name == change_file_names.change_file_name(live.version, stream.name):
            rewrite = True
            continue
        with suppress(FileNotFoundError):
            path.unlink()
            counts["change_files"] += 1
    if rewrite:
        # Imported here, as a publish does: Arrow without pandas.
        from ductwork.history.change_files import write_change_files
        from ductwork.warehouse.columns import pyarrow_without_pandas

        pyarrow_without_pandas()
        with guard.open_locked(live.path) as con:
            write_change_files(con, folder)
        counts["change_files"] += 1


def _lists_any(change_file: ChangeFile, keys: list[str]) -> bool:
    wanted = set(keys)
    return any(key in wanted for key in change_file.keys.to_pylist())


def _erase_from_store(
    store: SnapshotStore, folder: Path, removed: set[str], stream: Stream, keys: list[str]
) -> int:
    """Delete the store's snapshot files (and checksums) holding a key: those removed here,
    and those the folder no longer has, downloaded to be asked; never the current one."""
    pointer = store.read_pointer()
    deleted = 0
    for name in sorted(store.snapshot_names()):
        if pointer is not None and name == pointer.name:
            continue
        kept_here = (folder / name).exists()  # asked above, and holding nothing
        if name not in removed and (
            kept_here or not _stored_copy_holds(store, folder, name, stream, keys)
        ):
            continue
        deleted += store.delete_snapshot(name)
    return deleted


def _stored_copy_holds(
    store: SnapshotStore, folder: Path, name: str, stream: Stream, keys: list[str]
) -> bool:
    """Whether the store's snapshot file ``name`` holds a key: downloaded beside the folder's
    snapshots under a hidden name, asked, then removed."""
    copy = folder / f"{snapshots.STAGING_PREFIX}erasure-{uuid.uuid4().hex}{snapshots.SUFFIX}"
    try:
        store.download(name, copy)
        return holds(copy, stream, keys)
    finally:
        copy.unlink(missing_ok=True)
        Path(f"{copy}.wal").unlink(missing_ok=True)


def _configured_store() -> SnapshotStore | None:
    url = load(SnapshotStoreSettings).snapshot_store
    return None if url is None else SnapshotStore.connect(url, load(S3Settings))


def _count(paths: Iterable[Path], counts: Counter, snapshot_kind: str = "snapshot_files") -> None:
    """Count removed files by kind: snapshot files (``snapshot_kind``), record files, change
    files (checksums go uncounted with their snapshot)."""
    for path in paths:
        name = path.name
        if name.startswith(record_files.RECORDS_PREFIX):
            counts["record_files"] += 1
        elif name.startswith(change_file_names.CHANGES_PREFIX):
            counts["change_files"] += 1
        elif name.endswith(snapshots.SUFFIX):
            counts[snapshot_kind] += 1
