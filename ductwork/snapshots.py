"""Immutable DuckDB snapshots of the warehouse, and the atomic pointer to the current one.

The pipeline alone opens the working warehouse file (DuckDB allows one writer or many readers,
never both). Publishing copies it into a new, never-rewritten file and then swaps the
``CURRENT`` pointer with write-fsync-rename, so readers (the read API, analysts) always open a
complete snapshot read-only and never contend with a running sync.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from warehouse_sql import read_sql

POINTER = "CURRENT"
PREFIX = "snapshot-"
SUFFIX = ".duckdb"


@dataclass(frozen=True)
class Snapshot:
    """One published snapshot."""

    version: str
    path: Path

    @property
    def published_at(self) -> datetime:
        """When it was published (from its file's modification time)."""
        return datetime.fromtimestamp(self.path.stat().st_mtime, UTC)


def new_version() -> str:
    """A sortable, unique version name: UTC time to the microsecond plus a random tail."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def publish(warehouse: duckdb.DuckDBPyConnection, snapshots_dir: Path) -> Snapshot:
    """Copy the warehouse into a new snapshot file and make it current."""
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    version = new_version()
    final = snapshots_dir / f"{PREFIX}{version}{SUFFIX}"
    staging = snapshots_dir / f".staging-{version}{SUFFIX}"
    try:
        _copy_into(warehouse, staging, version)
        _fsync(staging)
    except BaseException:
        # A failed publish (a full disk, most likely) must not leave a half-written copy
        # behind to take the space the next attempt needs.
        _remove_staging(staging)
        raise
    os.replace(staging, final)
    _write_atomically(snapshots_dir / POINTER, final.name)
    return Snapshot(version, final)


def _copy_into(warehouse: duckdb.DuckDBPyConnection, staging: Path, version: str) -> None:
    """Copy every table of the warehouse, plus the serving tables, into ``staging``."""
    source = warehouse.execute("SELECT current_database()").fetchall()[0][0]
    warehouse.execute("ATTACH ? AS snapshot_target", [str(staging)])
    try:
        warehouse.execute(f'COPY FROM DATABASE "{source}" TO snapshot_target')
        warehouse.execute("USE snapshot_target")
        try:
            warehouse.execute(read_sql("serving"))
            warehouse.execute(
                "CREATE TABLE snapshot_info AS SELECT ?::VARCHAR AS version, now() AS published_at",
                [version],
            )
        finally:
            warehouse.execute(f'USE "{source}"')
        warehouse.execute("CHECKPOINT snapshot_target")
    finally:
        warehouse.execute("DETACH snapshot_target")


def _remove_staging(staging: Path) -> None:
    for path in (staging, staging.with_name(staging.name + ".wal")):
        path.unlink(missing_ok=True)


def current(snapshots_dir: Path) -> Snapshot | None:
    """The current snapshot, or None before the first publish."""
    try:
        name = (snapshots_dir / POINTER).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    path = snapshots_dir / name
    if not name.startswith(PREFIX) or not path.exists():
        return None
    return Snapshot(name[len(PREFIX) : -len(SUFFIX)], path)


def prune(snapshots_dir: Path, keep: int = 3, grace_s: float = 600.0) -> list[Path]:
    """Delete snapshots beyond the newest ``keep`` that were replaced over ``grace_s`` ago.

    Readers load a snapshot when it becomes current; the grace period covers a reader that
    started loading just before a newer one was published.
    """
    live = current(snapshots_dir)
    files = sorted(snapshots_dir.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)
    removed = []
    now = time.time()
    for path in files[keep:]:
        if live is not None and path == live.path:
            continue
        if now - path.stat().st_mtime > grace_s:
            path.unlink(missing_ok=True)
            removed.append(path)
    # Copies left by a publish that was killed part way; never made current.
    for path in snapshots_dir.glob(f".staging-*{SUFFIX}*"):
        if now - path.stat().st_mtime > grace_s:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def open_current(snapshots_dir: Path) -> tuple[Snapshot, duckdb.DuckDBPyConnection]:
    """Open the current snapshot read-only; raise FileNotFoundError before the first publish."""
    snap = current(snapshots_dir)
    if snap is None:
        raise FileNotFoundError(
            f"no published snapshot under {snapshots_dir}: run a sync first (ductwork sync)"
        )
    return snap, duckdb.connect(str(snap.path), read_only=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync(path.parent)
