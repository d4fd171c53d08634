"""When the sync's warehouse checkpoints: seldom inside the steps that keep a core busy, and
beside the one step that mostly waits on the network.

DuckDB commits a write to the write-ahead log, and the first commit that leaves the log past
``checkpoint_threshold`` (16 MB by default) rewrites the changed parts of the database file
before it returns. With the default, every third 10,000-row commit of the digital assets
checkpointed: 2.9 s of that step's 13.4 s in a profiled medium sync, on the one core the step
keeps busy. Raised, those steps only append to the log, and the lead details, which wait on the
upstream for most of their step, checkpoint what the earlier steps wrote on a second
connection while they fetch. The publish's own checkpoint then writes only what came after.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import duckdb

# Far above what a medium sync's steps write before the lead details (the log peaked at 249 MB),
# so they commit without checkpointing; a larger warehouse still checkpoints past it, which
# bounds the log and what a restart after a crash replays.
CHECKPOINT_THRESHOLD = "1GB"


def defer_checkpoints(con: duckdb.DuckDBPyConnection) -> None:
    """Let commits on the warehouse of ``con`` grow the log up to ``CHECKPOINT_THRESHOLD``
    before one of them checkpoints (a setting of the database, for every connection to it)."""
    con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")


@contextmanager
def checkpoint_in_background(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Checkpoint the warehouse of ``con`` on a second connection while the block runs.

    Commits on other connections wait while the checkpoint runs, so the block should be one
    that mostly waits on something else. Leaving the block waits for the checkpoint, and
    raises its error if it failed and the block did not.
    """
    second = con.cursor()
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="warehouse-checkpoint") as pool:
            checkpoint = pool.submit(second.execute, "CHECKPOINT")
            yield
            checkpoint.result()
    finally:
        second.close()
