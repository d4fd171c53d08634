"""Publishing: the warehouse copied into a new snapshot file that becomes current, or, when
the current snapshot already holds the same content (the same content fingerprint), only the
pointer rewritten, whose modification time then says when a sync last confirmed the snapshot.

The pipeline alone opens the working warehouse file (DuckDB allows one writer or many readers,
never both), so the copy is made here, by the writer, and never rewritten after.

Every publish also stamps the warehouse file as it left it (``ductwork.snapshots.stamp``).
DuckDB commits every write to the file's write-ahead log, and a checkpoint rewrites the file
itself, so a warehouse whose file and log are both exactly as stamped has not been written
since: the next publish then confirms the snapshot without reading every table for the
fingerprint.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from ductwork import file_modes
from ductwork.history.recording import Erase, record_publish
from ductwork.history.row_versions import hash_current_rows
from ductwork.snapshots import guard
from ductwork.snapshots.fingerprint import (
    RELEASE,
    content_fingerprint,
    release_digest,
    same_release,
    unchanged_tables,
)
from ductwork.snapshots.folder import (
    POINTER,
    PREFIX,
    STAGING_PREFIX,
    SUFFIX,
    Snapshot,
    current,
    new_version,
    publishing_lock,
    version_of,
)
from ductwork.snapshots.stamp import (
    Database,
    WarehouseStamp,
    unchanged_since_stamp,
    write_ahead_log,
)
from ductwork.streams.registry import numbered_lists
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.schema import add_snapshot_extras, drop_warehouse_only
from warehouse_sql import fill, quote_identifier, read_sql, section


@dataclass(frozen=True)
class Publication:
    """The outcome of a publish: the current snapshot, whether it is a new copy, and whether
    the warehouse was fingerprinted (a warehouse untouched since its stamp is not)."""

    snapshot: Snapshot
    copied: bool
    fingerprint: str
    fingerprinted: bool = True


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
    release = f";{RELEASE}:{release_digest()}"
    database = Database.in_use(warehouse)
    live = current(snapshots_dir)
    if live is not None and erase is None:
        stamp = unchanged_since_stamp(snapshots_dir, live.path.name, database.path, release)
        if stamp is not None:
            _point_at(snapshots_dir, live)
            return Publication(
                live, copied=False, fingerprint=stamp.fingerprint, fingerprinted=False
            )
    found = _Fingerprinted.of(warehouse, live, release)
    if live is not None and found.live_fingerprint == found.fingerprint and erase is None:
        # Written since the stamp, yet the same content: stamp the file as the log's
        # checkpoint leaves it, so the next run that writes nothing is vouched for. Should the
        # checkpoint fail, the stamp records the log as it is and goes stale at the next close:
        # that only costs the next run a fingerprint.
        with suppress(duckdb.Error):
            warehouse.execute("CHECKPOINT")
        _point_at(snapshots_dir, live)
        _stamp(snapshots_dir, database.path, live, found.fingerprint)
        return Publication(live, copied=False, fingerprint=found.fingerprint)
    history = _History(keep_history, stream_keep, erase)
    published = _publish_copy(warehouse, database, snapshots_dir, live, found, history)
    _stamp(snapshots_dir, database.path, published, found.fingerprint)
    return Publication(published, copied=True, fingerprint=found.fingerprint)


def _point_at(snapshots_dir: Path, live: Snapshot) -> None:
    """Rewrite the pointer to the current snapshot ``live``: its date confirms it."""
    with publishing_lock(snapshots_dir):
        file_modes.write_atomically(snapshots_dir / POINTER, live.path.name)


@dataclass(frozen=True)
class _Fingerprinted:
    """The warehouse's content fingerprint (with the versioned tables whose rows were hashed
    for it) and what the current snapshot recorded: its fingerprint and its definitions."""

    hashed: list[str]
    fingerprint: str
    live_fingerprint: str | None
    live_definitions: guard.Definitions | None

    @classmethod
    def of(
        cls, warehouse: duckdb.DuckDBPyConnection, live: Snapshot | None, release: str
    ) -> _Fingerprinted:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The current snapshot's file is read on another thread while the warehouse is
            # hashed.
            facts = pool.submit(_published_facts, live) if live is not None else None

            def fingerprinted() -> tuple[list[str], str]:
                # The rows of the versioned tables are hashed once, for the fingerprint and the
                # history (into temp tables a second try replaces).
                hashed = hash_current_rows(warehouse)
                return hashed, content_fingerprint(warehouse, hashed) + release

            hashed, fingerprint = with_memory_headroom(
                warehouse, fingerprinted, what="fingerprinting the warehouse"
            )
        live_fingerprint, live_definitions = facts.result() if facts is not None else (None, None)
        return cls(hashed, fingerprint, live_fingerprint, live_definitions)

    @property
    def same_release(self) -> bool:
        """Whether this release published the current snapshot."""
        return same_release(self.live_fingerprint, self.fingerprint)


@dataclass(frozen=True)
class _History:
    """What a publish keeps in the history, and the erasure it carries out there (if any)."""

    keep: timedelta
    stream_keep: Mapping[str, timedelta] | None
    erase: Erase | None


def _publish_copy(
    warehouse: duckdb.DuckDBPyConnection,
    database: Database,
    snapshots_dir: Path,
    live: Snapshot | None,
    found: _Fingerprinted,
    history: _History,
) -> Snapshot:
    """Record the publish in the history, copy the warehouse into a new snapshot with its
    change files and checksum, and make it current."""
    version = new_version()
    final = snapshots_dir / f"{PREFIX}{version}{SUFFIX}"
    staging = snapshots_dir / f"{STAGING_PREFIX}{version}{SUFFIX}"
    with publishing_lock(snapshots_dir):
        _record(warehouse, live, version, found, history)
        try:
            # The current snapshot's definitions, when this release published it, are what a
            # publish makes: the copy is checked against them before building them anew.
            published = found.live_definitions if found.same_release else None
            _copy_into(warehouse, database, staging, version, found.fingerprint, published)
            file_modes.fsync(staging)
            _write_change_files_and_checksum(warehouse, snapshots_dir, staging, final)
        except BaseException:
            # A failed publish (a full disk, most likely) must not leave a half-written copy
            # behind to take the space the next attempt needs.
            _remove_staging(staging)
            raise
        os.replace(staging, final)
        file_modes.write_atomically(snapshots_dir / POINTER, final.name)
    return Snapshot(version, final)


def _record(
    warehouse: duckdb.DuckDBPyConnection,
    live: Snapshot | None,
    version: str,
    found: _Fingerprinted,
    history: _History,
) -> None:
    """Record the publish ``version`` in the warehouse's history."""
    erase = history.erase
    published_at = datetime.now(UTC)
    # From here on one thread: each of DuckDB's threads holds its own part of a join, and at
    # large the recording's joins outgrew the sync's limit on two (raised, the run then peaked
    # 40 MiB higher), while on one the publish took no longer at medium. The recording is one
    # transaction: should it still run out of memory, it is rolled back and run again under a
    # raised limit, as the sync's writes are.
    warehouse.execute("SET threads = 1")
    with_memory_headroom(
        warehouse,
        lambda: record_publish(
            warehouse,
            live.path if live else None,
            version,
            published_at,
            history.keep,
            unchanged=unchanged_tables(found.live_fingerprint, found.fingerprint),
            stream_keep=history.stream_keep,
            erase=erase,
            # An erasure may delete current rows: their hashes are then taken anew.
            hashed=found.hashed if erase is None else (),
            # The feed's recorded state is then the current snapshot's, made by this release.
            follow_changes=erase is None and found.same_release,
        ),
        what="recording the publish",
    )


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
        checksum = pool.submit(guard.checksum_of, staging)
        write_change_files(warehouse, snapshots_dir)
    guard.write_checksum_text(final, checksum.result())


def _stamp(
    snapshots_dir: Path, database: Path | None, snapshot: Snapshot, fingerprint: str
) -> None:
    if database is not None:
        WarehouseStamp.of(database, snapshot.path.name, fingerprint).write(snapshots_dir)


def _published_facts(snapshot: Snapshot) -> tuple[str | None, guard.Definitions | None]:
    """The content fingerprint recorded in a snapshot (None for one published without it) and
    its definitions (None when the file cannot be read)."""
    try:
        # As readers open it: a process opens one file with one configuration only.
        with guard.open_locked(snapshot.path) as con:
            found = con.execute(read_sql("snapshot_fingerprint")).fetchall()
            definitions = guard.definitions_of(con)
    except duckdb.Error:
        return None, None
    return (found[0][0] if found else None), definitions


def _copy_into(
    warehouse: duckdb.DuckDBPyConnection,
    database: Database,
    staging: Path,
    version: str,
    fingerprint: str,
    published: guard.Definitions | None = None,
) -> None:
    """Copy the warehouse file into ``staging``, then add the serving tables to the copy;
    ``published``: the definitions of a snapshot this release published (see ``drop_strays``).

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
            # beyond the published definitions and has the expected ones built every publish.
            drop_warehouse_only(warehouse)
            # Readers refuse a snapshot holding anything a publish does not make: what the
            # warehouse holds beyond that (a removed stream's tables) stays out of the copy.
            guard.drop_strays(warehouse, published)
            add_snapshot_extras(warehouse, version, fingerprint)
            guard.check_definitions(warehouse, staging.name, published)
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
    with publishing_lock(snapshots_dir):
        if not final.exists():
            try:
                fill(staging)
                file_modes.current().secure(staging)  # a download takes the mask's mode
                file_modes.fsync(staging)
                if guard.checksum_of(staging) != checksum:
                    raise guard.SnapshotRefused(name, guard.MISMATCH)
                guard.write_checksum_text(final, checksum)
                os.utime(staging, (published_at, published_at))
            except BaseException:
                _remove_staging(staging)
                raise
            os.replace(staging, final)
        file_modes.write_atomically(snapshots_dir / POINTER, name)
    return Snapshot(version_of(name), final)
