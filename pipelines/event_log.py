"""Dagster's SQLite event log, with each database kept open between writes.

Dagster's own SQLite event log creates an engine, opens the database, commits and closes it
again for every event it stores: a run of ``sync_all`` stores some two hundred events (and
copies the asset events to the index database), and on SQLite in WAL mode each close of the
last connection checkpoints the log. Most of a run with nothing to sync went there. This
storage keeps one open connection per database instead. Each event is still committed in its
own transaction, as before, so what a crash of the process leaves behind is unchanged; the
files, tables and rows are exactly Dagster's. A commit does not wait for the disk, though (see
``_commit_without_fsync``).

Only the process that executes a ``ductwork`` run uses it (see ``pipelines.instance``); the
UI and the daemon keep Dagster's storage as ``dagster.yaml`` configures it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

# SQLite's ``synchronous`` level for the run's event log (see ``_commit_without_fsync``).
SYNCHRONOUS = "NORMAL"
# Databases kept open at once: the index and the current run's, with room for the few runs
# a check or the UI's queries read; the least recently used is closed beyond that.
OPEN_DATABASES = 8


class HeldSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that opens each database once and keeps it open."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables_found: set[str] = set()
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> HeldSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        # SQLAlchemy's default pool for a SQLite file: a connection goes back to the pool,
        # open, when a block ends.
        engine = create_engine(
            self.conn_string_for_shard(shard),
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
        )
        event.listen(engine, "connect", _commit_without_fsync)
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        while len(self._engines) > OPEN_DATABASES:
            _, oldest = self._engines.popitem(last=False)
            oldest.dispose()
        return engine

    def has_table(self, table_name: str) -> bool:
        # Dagster asks before storing each asset event, opening the index each time; a table
        # once there stays (wiping empties the tables, it does not drop them).
        if table_name in self._tables_found:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables_found.add(table_name)
        return found

    def _close(self) -> None:
        """Close every database held open (before their files go away, or at the end)."""
        with self._db_lock:
            while self._engines:
                _, engine = self._engines.popitem()
                engine.dispose()

    def wipe(self) -> None:
        self._close()
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        self._close()


def _commit_without_fsync(dbapi_connection: Any, _record: Any) -> None:
    """Commit to the write-ahead log without an fsync per event (``synchronous=NORMAL``).

    The event log is in WAL mode, where this level keeps every committed event through a
    crash or kill of the process and keeps the database consistent through a power cut; only
    the last events before a power cut may be lost. Waiting for the disk after each of a run's
    two hundred events (and their copies in the index) took a tenth of a run with nothing to
    sync.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    finally:
        cursor.close()
