"""The warehouse file as a publish left it: a stamp that tells the next publish whether
anything has written to it since (see ``ductwork.snapshots``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import duckdb

from ductwork import file_modes
from warehouse_sql import read_sql

STAMP = "WAREHOUSE-STAMP"  # in the snapshots folder


def write_ahead_log(database: Path) -> Path:
    """Where DuckDB keeps the committed changes not yet checkpointed into ``database``."""
    return Path(f"{database}.wal")


class FileIdentity(NamedTuple):
    """What ``stat`` says of a file that any write to it changes."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def _identity(path: Path) -> FileIdentity | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return FileIdentity(
        found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns
    )


@dataclass(frozen=True)
class WarehouseStamp:
    """The warehouse file and its write-ahead log as a publish left them, and the snapshot
    (with its fingerprint) that held the same content then.

    The change time (``ctime``) cannot be set back by any program, and both files are
    compared, so an equal stamp means no write reached the warehouse since.
    """

    snapshot: str  # the snapshot file's name
    fingerprint: str
    warehouse: FileIdentity | None
    wal: FileIdentity | None

    @classmethod
    def of(cls, database: Path, snapshot: str, fingerprint: str) -> WarehouseStamp:
        """The stamp of ``database`` as it is now, for the snapshot file named ``snapshot``."""
        wal = _identity(write_ahead_log(database))
        return cls(snapshot, fingerprint, _identity(database), wal)

    @classmethod
    def read(cls, snapshots_dir: Path) -> WarehouseStamp | None:
        """The last stamp written, or None (none yet, or unreadable)."""
        try:
            saved = json.loads((snapshots_dir / STAMP).read_text(encoding="utf-8"))
            return cls(
                str(saved["snapshot"]),
                str(saved["fingerprint"]),
                _as_identity(saved["warehouse"]),
                _as_identity(saved["wal"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, snapshots_dir: Path) -> None:
        """Keep this stamp for the next publish."""
        text = json.dumps(
            {
                "snapshot": self.snapshot,
                "fingerprint": self.fingerprint,
                "warehouse": self.warehouse,
                "wal": self.wal,
            }
        )
        file_modes.write_atomically(snapshots_dir / STAMP, text)


def _as_identity(value: object) -> FileIdentity | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != len(FileIdentity._fields):
        raise ValueError("not a file identity")
    return FileIdentity(*(int(field) for field in value))


def unchanged_since_stamp(
    snapshots_dir: Path, live: str, database: Path | None, release: str
) -> WarehouseStamp | None:
    """The stamp, when it vouches that the warehouse still holds what the snapshot file named
    ``live`` holds: it was
    taken for that snapshot, with this ``release`` (the fingerprint's last part, see
    ``fingerprint.release_digest``), and the files have not changed since."""
    stamp = WarehouseStamp.read(snapshots_dir)
    if stamp is None or database is None or stamp.warehouse is None:
        return None
    if stamp.warehouse.mtime_ns % 1_000_000_000 == 0:
        # A file system that keeps whole seconds only: a write within the stamp's own second
        # could leave every field as stamped, so such a stamp vouches for nothing.
        return None
    if stamp.snapshot != live or not stamp.fingerprint.endswith(release):
        return None
    return stamp if WarehouseStamp.of(database, live, stamp.fingerprint) == stamp else None


@dataclass(frozen=True)
class Database:
    """The database a connection uses: its name and its file (None for one in memory)."""

    name: str
    path: Path | None

    @classmethod
    def in_use(cls, con: duckdb.DuckDBPyConnection) -> Database:
        name, path = con.execute(read_sql("database_file")).fetchall()[0]
        return cls(name, Path(path) if path else None)
