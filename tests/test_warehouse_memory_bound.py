"""The sync's warehouse connection checkpoints before committed rows crowd its memory limit.

DuckDB holds the rows committed since the last checkpoint in its buffer pool, under the
connection's ``memory_limit``, and past it spills them to temporary files. Deferring checkpoints
far beyond that limit made a large sync's digital-asset step fail with "failed to pin block"
once the lead details had filled the pool. Real DuckDB files; the log is seen from outside.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from ductwork.settings import SyncSettings, load
from ductwork.snapshots.stamp import write_ahead_log
from ductwork.warehouse.opening import prepare_connection

BATCH_ROWS = 10_000  # far below a row group, so each insert goes through the log
BATCHES = 24  # about 170 MB committed in all: past the sync's default limit of 64 MB
UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def limit_bytes(setting: str) -> int:
    """Bytes in a memory limit as the sync's setting spells it (``128MB``, ``1GiB``)."""
    number, unit = re.fullmatch(r"([0-9]+)([A-Za-z]+)", setting).groups()
    return int(number) * UNITS[unit]


def test_the_sync_s_connection_checkpoints_before_committed_rows_fill_its_memory_limit(
    tmp_path: Path,
) -> None:
    database = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(database))
    prepare_connection(con)
    con.execute("CREATE TABLE written (i BIGINT, text VARCHAR)")
    limit = limit_bytes(load(SyncSettings).warehouse_memory_limit)
    log_sizes: list[int] = []
    spilled: list[int] = []
    for n in range(BATCHES):
        start = n * BATCH_ROWS
        con.execute(
            "INSERT INTO written"
            " SELECT i, md5(i::VARCHAR) || repeat('x', 668) FROM range(?, ?) t(i)",
            [start, start + BATCH_ROWS],
        )
        log = write_ahead_log(database)
        log_sizes.append(log.stat().st_size if log.exists() else 0)
        spilled.append(
            con.execute("SELECT sum(temporary_storage_bytes) FROM duckdb_memory()").fetchone()[0]
        )
    con.close()

    assert sum(1 for size in log_sizes if size == 0) >= 1, "the commits never checkpointed"
    assert max(log_sizes) < limit // 2, f"log grew to {max(log_sizes):,} bytes"
    assert max(spilled) == 0, f"committed rows spilled {max(spilled):,} bytes to disk"


def test_a_stream_step_works_on_one_duckdb_thread_and_the_publish_on_every_core(
    tmp_path: Path,
) -> None:
    """Unit test on a real DuckDB file: the thread count belongs to the database, shared by
    its connections, so a step's preparation sets it either way, whatever the step before
    it left."""
    database = str(tmp_path / "warehouse.duckdb")
    every_core = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0]
    stream_step = duckdb.connect(database)
    prepare_connection(stream_step)
    publish = duckdb.connect(database)
    assert publish.execute("SELECT current_setting('threads')").fetchone()[0] == 1
    prepare_connection(publish, parallel=True)
    assert stream_step.execute("SELECT current_setting('threads')").fetchone()[0] == every_core
    prepare_connection(stream_step)
    assert publish.execute("SELECT current_setting('threads')").fetchone()[0] == 1
