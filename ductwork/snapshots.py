"""Immutable DuckDB snapshots of the warehouse, and the atomic pointer to the current one.

The pipeline alone opens the working warehouse file (DuckDB allows one writer or many readers,
never both). Publishing copies it into a new, never-rewritten file and then swaps the
``CURRENT`` pointer with write-fsync-rename, so readers (the read API, analysts) always open a
complete snapshot read-only and never contend with a running sync.

A publish whose warehouse holds exactly what the current snapshot holds (the same content
fingerprint) copies nothing: it only rewrites the pointer, whose modification time then says
when a sync last confirmed the snapshot as current.

Every publish also stamps the warehouse file as it left it (``ductwork.warehouse_stamp``). DuckDB
commits every write to the file's write-ahead log, and a checkpoint rewrites the file itself,
so a warehouse whose file and log are both exactly as stamped has not been written since: the
next publish then confirms the snapshot without reading every table for the fingerprint.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from ductwork import file_modes, snapshot_guard
from ductwork.history.change_file_names import CHANGES_PARTIAL, CHANGES_PREFIX
from ductwork.history.recording import (
    Erase,
    as_of_macro,
    hash_current_rows,
    kept_tables,
    now_hashes_name,
    record_publish,
)
from ductwork.streams.registry import STREAMS, numbered_lists
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.schema import (
    add_snapshot_extras,
    drop_warehouse_only,
    schema_sql,
    snapshot_sql,
)
from ductwork.warehouse_stamp import (
    STAMP,
    WarehouseStamp,
    unchanged_since_stamp,
    write_ahead_log,
)
from warehouse_sql import fill, quote_identifier, read_sql, section, stream_section

POINTER = "CURRENT"
PREFIX = "snapshot-"
SUFFIX = ".duckdb"
STAGING_PREFIX = ".staging-"
PUBLISH_LOCK = ".publish.lock"
# The part of a content fingerprint that names its release (``_release_digest``: the publishing
# SQL, which gave the part its name, the tables' DDL, the versioned tables, DuckDB's version).
RELEASE = "publish-sql"
# A serving worker writes each large list's records into a hidden file beside the snapshot it
# serves (``serve.record_file``): ``.records-<hash>``, first as ``.records-<random>.partial``
# under ``.records.lock``. Named here, so that ``prune`` removes them with their snapshots.
RECORDS_PREFIX = ".records-"
RECORDS_PARTIAL = ".partial"
RECORDS_LOCK = ".records.lock"


@dataclass(frozen=True)
class Snapshot:
    """One published snapshot."""

    version: str
    path: Path

    @property
    def published_at(self) -> datetime:
        """When it was published (from its file's modification time)."""
        return datetime.fromtimestamp(self.path.stat().st_mtime, UTC)


def version_of(name: str) -> str:
    """The version a snapshot's file name carries (``snapshot-<version>.duckdb``)."""
    return name.removeprefix(PREFIX).removesuffix(SUFFIX)


def record_file_name(snapshot: Path, table: str) -> str:
    """The name of the record file of ``table`` (a numbered list) of the snapshot file
    ``snapshot``, beside it: named after the file's identity, so a snapshot copied or changed
    in place gets a file of its own."""
    if table not in numbered_lists():
        # prune keeps the record files of a snapshot by these names: none other may be made.
        raise ValueError(f"{table} is not a numbered list: it has no record file")
    info = snapshot.stat()
    identity = f"{snapshot.name}|{info.st_ino}|{info.st_mtime_ns}|{info.st_size}|{table}"
    return RECORDS_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:32]


def record_file_names(snapshot: Path) -> set[str]:
    """The names of every record file the snapshot file ``snapshot`` may have (one per
    numbered list)."""
    return {record_file_name(snapshot, table) for table in numbered_lists()}


def record_files_in_use(folder: Path) -> set[str]:
    """The names of the record files in ``folder`` that a writer of another must keep: those
    of the current snapshot (if ``folder`` holds the pointer) and of every snapshot file there
    that a reader leases (``Lease``), the past ones a worker serves included."""
    live = current(folder)
    kept: set[str] = set()
    for snapshot in folder.glob(f"*{SUFFIX}"):
        if snapshot.name.startswith("."):  # a copy being written: it has no record file yet
            continue
        if (live is not None and snapshot == live.path) or in_use(snapshot):
            with suppress(FileNotFoundError):  # pruned meanwhile
                kept.update(record_file_names(snapshot))
    return kept


def new_version() -> str:
    """A sortable, unique version name: UTC time to the microsecond plus a random tail."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Publication:
    """The outcome of a publish: the current snapshot, whether it is a new copy, and whether
    the warehouse was fingerprinted (a warehouse untouched since its stamp is not)."""

    snapshot: Snapshot
    copied: bool
    fingerprint: str
    fingerprinted: bool = True


def content_fingerprint(con: duckdb.DuckDBPyConnection, hashed: Collection[str] = ()) -> str:
    """A fingerprint of every table's content in the database in use: per table, its row count
    and an order-independent sum of row hashes, run-time columns (``synced_at``, a bookmark's
    ``updated_at``) left out. Equal content gives an equal fingerprint.

    ``hashed`` names the tables whose rows ``hash_current_rows`` hashed (the same hashes):
    their sums are taken from those."""
    # One query over every table, so that DuckDB's threads share the tables between them (most
    # tables are a single row group, which one query per table would hash on one thread).
    tables = con.execute(read_sql("content_columns")).fetchall()
    sums = " UNION ALL ".join(
        f"SELECT {index} AS position, count(*), coalesce(sum({_row_hash(table, columns, hashed)}"
        f"::HUGEINT), 0) FROM {_hashed_rows(table, hashed)}"
        for index, (table, columns) in enumerate(tables)
    )
    counted = con.execute(f"{sums} ORDER BY position").fetchall() if tables else []
    return ";".join(f"{tables[index][0]}:{count}:{total}" for index, count, total in counted)


def _row_hash(table: str, columns: list[str], hashed: Collection[str]) -> str:
    """The expression of a row's hash in the fingerprint's sum of ``table``."""
    if table in hashed:
        return "row_hash"
    return f"hash({', '.join(quote_identifier(c) for c in columns)})"


def _hashed_rows(table: str, hashed: Collection[str]) -> str:
    """What the fingerprint's sum of ``table`` reads: the table, or its rows' hashes."""
    return now_hashes_name(table) if table in hashed else quote_identifier(table)


def stamped_as_current(
    warehouse: duckdb.DuckDBPyConnection, snapshots_dir: Path
) -> WarehouseStamp | None:
    """The stamp that vouches the warehouse ``warehouse`` is untouched since it was published
    (or confirmed) as the current snapshot of ``snapshots_dir`` by this release, or None: what
    that publish's checks found of it then still holds."""
    live = current(snapshots_dir)
    if live is None:
        return None
    release = f";{RELEASE}:{_release_digest()}"
    database = _Database.in_use(warehouse)
    return unchanged_since_stamp(snapshots_dir, live.path.name, database.path, release)


def _release_digest() -> str:
    """A digest of what decides a snapshot's catalog: the SQL a publish runs beyond the
    warehouse's tables, the tables' own DDL, the tables whose rows are versioned, and the
    DuckDB release that prints it all.

    What publishing adds (serving tables, comments, views, the history's macros and each
    stream's feed) is part of a snapshot too: a new release of that SQL must publish anew even
    when the data has not changed. And a publisher takes the catalog of a snapshot of the same
    release as what a publish makes (``snapshot_guard.check_catalog``): a release that drops a
    table must not pass for the one that made it."""
    publishing_sql = (
        snapshot_sql()
        + read_sql("snapshot_info")
        + read_sql("snapshot_info_comments")
        + read_sql("history")
        + "".join(as_of_macro(stream.sql) for stream in STREAMS)
        + "".join(stream_section(stream.sql, "changed_keys") for stream in STREAMS)
        + schema_sql()
        + repr([(table.name, table.key) for table in kept_tables()])
        + duckdb.__version__
    )
    return hashlib.blake2b(publishing_sql.encode(), digest_size=8).hexdigest()


def unchanged_tables(before: str | None, after: str) -> set[str]:
    """The tables whose content is the same in two content fingerprints (``before`` None: no
    table). Under another release (``_release_digest``) none is: what a publish makes of a
    table may differ."""
    if before is None or not same_release(before, after):
        return set()
    old, new = _fingerprint_parts(before), _fingerprint_parts(after)
    return {table for table, part in new.items() if table != RELEASE and old.get(table) == part}


def same_release(before: str | None, after: str) -> bool:
    """Whether two content fingerprints were taken by the same release (``_release_digest``;
    ``before`` None: no)."""
    if before is None:
        return False
    return _fingerprint_parts(before).get(RELEASE) == _fingerprint_parts(after).get(RELEASE)


def _fingerprint_parts(fingerprint: str) -> dict[str, str]:
    """A fingerprint's parts by name: each table's ``count:sum``, and the release's."""
    return dict(part.split(":", 1) for part in fingerprint.split(";") if ":" in part)


def publish(
    warehouse: duckdb.DuckDBPyConnection,
    snapshots_dir: Path,
    keep_history: timedelta = timedelta(days=90),
    stream_keep: Mapping[str, timedelta] | None = None,
    erase: Erase | None = None,
) -> Publication:
    """Copy the warehouse into a new snapshot file and make it current, unless the current
    snapshot already holds the same content (then only the pointer is rewritten).

    A new snapshot is first recorded in the warehouse's history (``ductwork.history``), which
    keeps ``keep_history`` of published versions (less for the streams ``stream_keep`` names)
    and travels in the copy. With ``erase`` (an erasure of keys from that history, ``ductwork
    forget``) a new snapshot is always made: the content fingerprint reads the current tables
    only, not the history the erasure changed."""
    file_modes.current().make_private_dir(snapshots_dir)
    release = f";{RELEASE}:{_release_digest()}"
    database = _Database.in_use(warehouse)
    live = current(snapshots_dir)
    if live is not None and erase is None:
        stamp = unchanged_since_stamp(snapshots_dir, live.path.name, database.path, release)
        if stamp is not None:
            with _publishing(snapshots_dir):
                file_modes.write_atomically(snapshots_dir / POINTER, live.path.name)
            return Publication(
                live, copied=False, fingerprint=stamp.fingerprint, fingerprinted=False
            )
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The current snapshot's file is read on another thread while the warehouse is hashed.
        facts = pool.submit(_published_facts, live) if live is not None else None

        def fingerprinted() -> tuple[list[str], str]:
            # The rows of the versioned tables are hashed once, for the fingerprint and the
            # history (into temp tables a second try replaces).
            hashed = hash_current_rows(warehouse)
            return hashed, content_fingerprint(warehouse, hashed) + release

        hashed, fingerprint = with_memory_headroom(
            warehouse, fingerprinted, what="fingerprinting the warehouse"
        )
    live_fingerprint, live_catalog = facts.result() if facts is not None else (None, None)
    if live is not None and live_fingerprint == fingerprint and erase is None:
        # Written since the stamp, yet the same content: stamp the file as the log's
        # checkpoint leaves it, so the next run that writes nothing is vouched for. Should the
        # checkpoint fail, the stamp records the log as it is and goes stale at the next close:
        # that only costs the next run a fingerprint.
        with suppress(duckdb.Error):
            warehouse.execute("CHECKPOINT")
        with _publishing(snapshots_dir):
            file_modes.write_atomically(snapshots_dir / POINTER, live.path.name)
        _stamp(snapshots_dir, database.path, live, fingerprint)
        return Publication(live, copied=False, fingerprint=fingerprint)
    version = new_version()
    final = snapshots_dir / f"{PREFIX}{version}{SUFFIX}"
    staging = snapshots_dir / f"{STAGING_PREFIX}{version}{SUFFIX}"
    published_at = datetime.now(UTC)
    with _publishing(snapshots_dir):
        # From here on one thread: each of DuckDB's threads holds its own part of a join, and
        # at large the recording's joins outgrew the sync's limit on two (raised, the run then
        # peaked 40 MiB higher), while on one the publish took no longer at medium. The
        # recording is one transaction: should it still run out of memory, it is rolled back
        # and run again under a raised limit, as the sync's writes are.
        warehouse.execute("SET threads = 1")
        with_memory_headroom(
            warehouse,
            lambda: record_publish(
                warehouse,
                live.path if live else None,
                version,
                published_at,
                keep_history,
                unchanged=unchanged_tables(live_fingerprint, fingerprint),
                stream_keep=stream_keep,
                erase=erase,
                # An erasure may delete current rows: their hashes are then taken anew.
                hashed=hashed if erase is None else (),
                # The feed's recorded state is then the current snapshot's, made by this release.
                follow_changes=erase is None and same_release(live_fingerprint, fingerprint),
            ),
            what="recording the publish",
        )
        try:
            # The current snapshot's catalog, when this release published it, is what a
            # publish makes: the copy is checked against it before building that catalog anew.
            published = live_catalog if same_release(live_fingerprint, fingerprint) else None
            _copy_into(warehouse, database, staging, version, fingerprint, published)
            file_modes.fsync(staging)
            _write_change_files_and_checksum(warehouse, snapshots_dir, staging, final)
        except BaseException:
            # A failed publish (a full disk, most likely) must not leave a half-written copy
            # behind to take the space the next attempt needs.
            _remove_staging(staging)
            raise
        os.replace(staging, final)
        file_modes.write_atomically(snapshots_dir / POINTER, final.name)
    published = Snapshot(version, final)
    _stamp(snapshots_dir, database.path, published, fingerprint)
    return Publication(published, copied=True, fingerprint=fingerprint)


def _write_change_files_and_checksum(
    warehouse: duckdb.DuckDBPyConnection, snapshots_dir: Path, staging: Path, final: Path
) -> None:
    """Write every stream's change file (before the snapshot is current, so that every server
    of it finds them) while another thread reads the finished copy ``staging`` for the
    checksum it will carry as ``final``: the two overlap, neither waits for the other."""
    # Imported here: it imports Arrow, which a process that only opens snapshots needs not;
    # and Arrow first without pandas, which its first conversion would import for nothing.
    from ductwork.warehouse.columns import pyarrow_without_pandas

    pyarrow_without_pandas()
    from ductwork.history.change_files import write_change_files

    # Leaving the pool waits for its thread, whatever happened: a failed publish does not
    # remove the copy while it is read.
    with ThreadPoolExecutor(max_workers=1) as pool:
        checksum = pool.submit(snapshot_guard.checksum_of, staging)
        write_change_files(warehouse, snapshots_dir)
    snapshot_guard.write_checksum_text(final, checksum.result())


@dataclass(frozen=True)
class _Database:
    """The database a connection uses: its name and its file (None for one in memory)."""

    name: str
    path: Path | None

    @classmethod
    def in_use(cls, con: duckdb.DuckDBPyConnection) -> _Database:
        name, path = con.execute(read_sql("database_file")).fetchall()[0]
        return cls(name, Path(path) if path else None)


def _stamp(
    snapshots_dir: Path, database: Path | None, snapshot: Snapshot, fingerprint: str
) -> None:
    if database is not None:
        WarehouseStamp.of(database, snapshot.path.name, fingerprint).write(snapshots_dir)


@contextmanager
def _publishing(snapshots_dir: Path) -> Iterator[None]:
    """A shared lock on the publish lock file for as long as a publish writes.

    The system drops it when the process dies, however it dies, so ``prune`` can tell the
    staging copy of a publish that was killed (nobody holds the lock) from one being written.
    """
    mode = file_modes.current().file_mode
    fd = os.open(snapshots_dir / PUBLISH_LOCK, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops its lock


def _published_facts(snapshot: Snapshot) -> tuple[str | None, snapshot_guard.Catalog | None]:
    """The content fingerprint recorded in a snapshot (None for one published without it) and
    its catalog (None when the file cannot be read)."""
    try:
        # As readers open it: a process opens one file with one configuration only.
        with snapshot_guard.open_locked(snapshot.path) as con:
            found = con.execute(read_sql("snapshot_fingerprint")).fetchall()
            catalog = snapshot_guard.catalog_of(con)
    except duckdb.Error:
        return None, None
    return (found[0][0] if found else None), catalog


def _copy_into(
    warehouse: duckdb.DuckDBPyConnection,
    database: _Database,
    staging: Path,
    version: str,
    fingerprint: str,
    published: snapshot_guard.Catalog | None = None,
) -> None:
    """Copy the warehouse file into ``staging``, then add the serving tables to the copy;
    ``published``: the catalog of a snapshot this release published (see ``drop_strays``).

    A checkpoint first writes every committed change into the warehouse file itself; the file
    is then copied as bytes, which is several times faster than ``COPY FROM DATABASE`` (that
    re-inserts every row and rebuilds every index). The publish step is the only writer at
    that moment, so the file does not change while it is copied.

    The serving tables point at base-table rows by rowid, so the copy's own checkpoint must
    not move those rows; that is checked, and a copy where it did is refused.
    """
    if database.path is None:
        raise RuntimeError("a warehouse held in memory has no file to publish")
    warehouse.execute("CHECKPOINT")
    wal = write_ahead_log(database.path)
    if wal.exists() and wal.stat().st_size > 0:
        raise RuntimeError(
            "the warehouse still has changes outside its file after a checkpoint; "
            "another writer may be running: publish again once it has finished"
        )
    shutil.copyfile(database.path, staging)
    file_modes.current().secure(staging)  # a copy takes the mask's mode, not the source's
    warehouse.execute("ATTACH ? AS snapshot_target", [str(staging)])
    try:
        rows_before = _row_id_extents(warehouse, "snapshot_target")
        warehouse.execute("USE snapshot_target")
        try:
            # First what no copy keeps (the erasures' schema): left to ``drop_strays``, it is
            # beyond the published catalog and has the expected catalog built every publish.
            drop_warehouse_only(warehouse)
            # Readers refuse a snapshot holding anything a publish does not make: what the
            # warehouse holds beyond that (a removed stream's tables) stays out of the copy.
            snapshot_guard.drop_strays(warehouse, published)
            add_snapshot_extras(warehouse, version, fingerprint)
            snapshot_guard.check_catalog(warehouse, staging.name, published)
        finally:
            warehouse.execute(f"USE {quote_identifier(database.name)}")
        warehouse.execute("CHECKPOINT snapshot_target")
        if _row_id_extents(warehouse, "snapshot_target") != rows_before:
            raise RuntimeError(
                "the snapshot's checkpoint changed the rows its numbered lists point at; "
                "nothing was published: publish again"
            )
    finally:
        warehouse.execute("DETACH snapshot_target")


def _row_id_extents(con: duckdb.DuckDBPyConnection, database: str) -> list[tuple]:
    """The last rowid and the row count of each base table of the numbered lists.

    A checkpoint may compact a table, removing deleted rows and moving every later row to a
    lower rowid, order kept. The last row then moves too, so an unchanged last rowid means
    that no row the numbered lists point at has moved.
    """
    statement = section("tables", "last_rowid")
    return [
        con.execute(fill(statement, database=database, table=base)).fetchall()[0]
        for base in numbered_lists().values()
    ]


def _remove_staging(staging: Path) -> None:
    for path in (staging, write_ahead_log(staging)):
        path.unlink(missing_ok=True)


def confirmed_at(snapshots_dir: Path) -> float | None:
    """When a sync last published or confirmed the current snapshot (epoch seconds)."""
    try:
        return (snapshots_dir / POINTER).stat().st_mtime
    except FileNotFoundError:
        return None


def confirm(snapshots_dir: Path, at: float) -> None:
    """Date the pointer ``at`` (epoch seconds): when the current snapshot was last confirmed
    where it was published (a replica copies the object store's date)."""
    with suppress(FileNotFoundError):
        os.utime(snapshots_dir / POINTER, (at, at))


def adopt(
    snapshots_dir: Path,
    name: str,
    fill: Callable[[Path], None],
    published_at: float,
    checksum: str,
) -> Snapshot:
    """Make a snapshot published elsewhere current here: ``fill`` writes the whole file (a
    download) into a staging path, which then becomes ``name``, dated ``published_at``, and
    the pointer names it, as a publish does. A file already here under ``name`` is kept.

    ``checksum`` is the one its publisher wrote: a download that does not match it is
    refused (``SnapshotRefused``) and left nowhere."""
    final = snapshots_dir / name
    staging = snapshots_dir / f"{STAGING_PREFIX}{name[len(PREFIX) :]}"
    with _publishing(snapshots_dir):
        if not final.exists():
            try:
                fill(staging)
                file_modes.current().secure(staging)  # a download takes the mask's mode
                file_modes.fsync(staging)
                if snapshot_guard.checksum_of(staging) != checksum:
                    raise snapshot_guard.SnapshotRefused(name, snapshot_guard.MISMATCH)
                snapshot_guard.write_checksum_text(final, checksum)
                os.utime(staging, (published_at, published_at))
            except BaseException:
                _remove_staging(staging)
                raise
            os.replace(staging, final)
        file_modes.write_atomically(snapshots_dir / POINTER, name)
    return Snapshot(version_of(name), final)


def current(snapshots_dir: Path) -> Snapshot | None:
    """The current snapshot, or None before the first publish."""
    try:
        name = (snapshots_dir / POINTER).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    path = snapshots_dir / name
    if not name.startswith(PREFIX) or not path.exists():
        return None
    return Snapshot(version_of(name), path)


def prune(snapshots_dir: Path, keep: int = 3, grace_s: float = 600.0) -> list[Path]:
    """Delete snapshots beyond the newest ``keep`` that were replaced over ``grace_s`` ago.

    A snapshot was replaced when the next newer one was published. A snapshot that a reader
    still leases (see ``Lease``) is kept whatever its age; the grace period covers a reader
    that read the ``CURRENT`` pointer just before a publish and has not taken its lease yet.
    The record files and change files written beside a snapshot (``record_file_name``,
    ``change_file_name``) go with it; those of a snapshot that stays are kept.
    """
    live = current(snapshots_dir)
    files = sorted(snapshots_dir.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)
    published = [path.stat().st_mtime for path in files]
    removed = []
    now = time.time()
    for index in range(max(keep, 1), len(files)):
        path = files[index]
        if live is not None and path == live.path:
            continue
        if now - published[index - 1] > grace_s and not in_use(path):
            path.unlink(missing_ok=True)
            snapshot_guard.checksum_path(path).unlink(missing_ok=True)
            removed.append(path)
    # Copies (and pointer and stamp drafts) left by a publish that was killed part way; never
    # made current. While some publish holds the lock, only those older than the grace period go.
    # Listed before the lock is tried: the drafts of a publish that begins after the listing are
    # not in it, and one that began before holds the lock.
    leftovers = [
        *snapshots_dir.glob(f"{STAGING_PREFIX}*{SUFFIX}*"),
        *_orphan_checksums(snapshots_dir),
        *snapshots_dir.glob(f".{POINTER}.*"),
        *snapshots_dir.glob(f".{STAMP}.*"),
    ]
    publishing = in_use(snapshots_dir / PUBLISH_LOCK)
    for path in leftovers:
        if not publishing or _older_than(path, now, grace_s):
            with suppress(FileNotFoundError):  # renamed into place, or removed, since listed
                path.unlink()
                removed.append(path)
    removed += _prune_change_files(snapshots_dir, now, grace_s)
    return removed + _prune_record_files(snapshots_dir, now, grace_s)


def _orphan_checksums(snapshots_dir: Path) -> list[Path]:
    """Checksums written for a snapshot that never took its name (a publish or a download
    killed between the two)."""
    pattern = f"{PREFIX}*{SUFFIX}{snapshot_guard.CHECKSUM_SUFFIX}"
    return [
        path
        for path in snapshots_dir.glob(pattern)
        if not path.with_name(path.name.removesuffix(snapshot_guard.CHECKSUM_SUFFIX)).exists()
    ]


def _prune_record_files(snapshots_dir: Path, now: float, grace_s: float) -> list[Path]:
    """Remove the record files of snapshots no longer here, and the drafts of record files
    whose writer is gone (or has written nothing for over ``grace_s``).

    The record files are listed before the snapshots: a worker writes one only for a snapshot
    already in place (and leased), so the snapshot of every record file listed is in the
    listing that follows unless it was deleted. Likewise the drafts are listed before the lock
    is tried: a draft begun after the listing is not in it.
    """
    found = sorted(snapshots_dir.glob(f"{RECORDS_PREFIX}*"))
    writing = in_use(snapshots_dir / RECORDS_LOCK)
    kept = set()
    for snapshot in snapshots_dir.glob(f"{PREFIX}*{SUFFIX}"):
        with suppress(FileNotFoundError):  # pruned meanwhile by another process
            kept.update(record_file_names(snapshot))
    removed = []
    for path in found:
        if path.name.endswith(RECORDS_PARTIAL):
            if writing and not _older_than(path, now, grace_s):
                continue  # a write in progress
        elif path.name in kept:
            continue
        with suppress(FileNotFoundError):  # renamed into place, or removed by its writer
            path.unlink()
            removed.append(path)
    return removed


def _prune_change_files(snapshots_dir: Path, now: float, grace_s: float) -> list[Path]:
    """Remove the change files of publishes whose snapshot is no longer here (or never took
    its name), and drafts; while a publish holds the lock, only those older than ``grace_s``
    (it writes its files before its snapshot is in place).

    Listed before the snapshots: a publish that begins after the listing has no file in it."""
    found = sorted(snapshots_dir.glob(f"{CHANGES_PREFIX}*"))
    publishing = in_use(snapshots_dir / PUBLISH_LOCK)
    versions = {version_of(path.name) for path in snapshots_dir.glob(f"{PREFIX}*{SUFFIX}")}
    removed = []
    for path in found:
        version = path.name.removeprefix(CHANGES_PREFIX).partition(".")[0]
        if not path.name.endswith(CHANGES_PARTIAL) and version in versions:
            continue
        if publishing and not _older_than(path, now, grace_s):
            continue  # a publish writing its files
        with suppress(FileNotFoundError):  # removed by another process meanwhile
            path.unlink()
            removed.append(path)
    return removed


def _older_than(path: Path, now: float, grace_s: float) -> bool:
    """Whether ``path`` was last written over ``grace_s`` before ``now`` (a file gone since
    counts as old: there is nothing left to keep)."""
    try:
        return now - path.stat().st_mtime > grace_s
    except FileNotFoundError:
        return True


class Lease:
    """A shared lock on a snapshot file, held by a reader for as long as it serves from it;
    ``prune`` never deletes a leased snapshot."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = os.open(path, os.O_RDONLY)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Let the snapshot go (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops its lock
            self._fd = None


def in_use(path: Path) -> bool:
    """Whether some reader holds a lease (or a publish or a record file's writer its lock) on
    ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def open_current(
    snapshots_dir: Path, config: dict[str, object] | None = None
) -> tuple[Snapshot, duckdb.DuckDBPyConnection]:
    """Open the current snapshot read-only, with DuckDB ``config`` settings applied as it opens
    (by default the settings every reader opens a snapshot with, ``snapshot_guard.LOCKED``);
    raise FileNotFoundError before the first publish."""
    snap = current(snapshots_dir)
    if snap is None:
        raise FileNotFoundError(
            f"no published snapshot under {snapshots_dir}: run a sync first (ductwork sync)"
        )
    settings = dict(snapshot_guard.LOCKED) if config is None else config
    return snap, duckdb.connect(str(snap.path), read_only=True, config=settings)
