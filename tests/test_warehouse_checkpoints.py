"""When the warehouse checkpoints: not in the commits of a connection the sync set up, and on a
second connection beside a block (the lead details' fetch, in the sync).

Real DuckDB files. A checkpoint is seen from outside, as the write-ahead log it empties.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ductwork.snapshots import write_ahead_log
from ductwork.store.checkpoints import checkpoint_in_background
from ductwork.store.loading import prepare_connection

BATCH_ROWS = 10_000  # far below a row group, so each insert goes through the log
BATCHES = 12  # about 24 MB of log in all: past DuckDB's default threshold of 16 MB
MB = 1 << 20


def commit_batches(con: duckdb.DuckDBPyConnection, first: int, batches: int) -> None:
    """Commit ``batches`` transactions of ``BATCH_ROWS`` rows of about 200 bytes each."""
    for n in range(first, first + batches):
        start = n * BATCH_ROWS
        con.execute(
            "INSERT INTO written"
            " SELECT i, md5(i::VARCHAR) || repeat('x', 168) FROM range(?, ?) t(i)",
            [start, start + BATCH_ROWS],
        )


def log_size(database: Path) -> int:
    """Bytes in the database's write-ahead log (0 when it has none)."""
    log = write_ahead_log(database)
    return log.stat().st_size if log.exists() else 0


def new_warehouse(database: Path, *, as_the_sync: bool) -> duckdb.DuckDBPyConnection:
    """A warehouse with an empty table ``written``, its connection set up as the sync sets up
    its own (``as_the_sync``) or left with DuckDB's defaults."""
    con = duckdb.connect(str(database))
    if as_the_sync:
        prepare_connection(con)
    con.execute("CREATE TABLE written (i BIGINT, text VARCHAR)")
    con.execute("CHECKPOINT")
    return con


def test_the_sync_s_commits_grow_the_log_past_duckdb_s_default_threshold_without_checkpointing(
    tmp_path: Path,
) -> None:
    default = new_warehouse(tmp_path / "default.duckdb", as_the_sync=False)
    deferred = new_warehouse(tmp_path / "deferred.duckdb", as_the_sync=True)

    commit_batches(default, 0, BATCHES)
    commit_batches(deferred, 0, BATCHES)

    # With DuckDB's default, a commit past 16 MB of log checkpointed and emptied it.
    assert log_size(tmp_path / "default.duckdb") < 16 * MB
    assert log_size(tmp_path / "deferred.duckdb") > 16 * MB
    default.close()
    deferred.close()


def test_a_checkpoint_beside_a_block_empties_the_log_while_the_block_s_commits_land(
    tmp_path: Path,
) -> None:
    database = tmp_path / "warehouse.duckdb"
    con = new_warehouse(database, as_the_sync=True)
    commit_batches(con, 0, BATCHES)
    before = log_size(database)

    with checkpoint_in_background(con):
        commit_batches(con, BATCHES, 1)  # waits while the checkpoint runs, then lands

    # At most the one batch committed beside the checkpoint is left in the log.
    assert log_size(database) < before / 4
    assert con.execute("SELECT count(*) FROM written").fetchall() == [((BATCHES + 1) * BATCH_ROWS,)]
    con.close()
