"""A write that runs out of DuckDB's memory limit is rolled back and retried under a raised
limit, so that a small limit keeps the sync's memory low without failing it at larger scales.

Unit tests on a real DuckDB database: the out-of-memory error is DuckDB's own.
"""

from __future__ import annotations

import logging

import duckdb
import pytest

from ductwork.warehouse.memory_headroom import DOUBLINGS, memory_limit_bytes, with_memory_headroom

MiB = 2**20


def one_list_of(numbers: int, con: duckdb.DuckDBPyConnection) -> None:
    """One transaction that builds a list of ``numbers`` integers in memory (a list aggregate
    cannot spill) and stores it, rolled back when it fails."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "CREATE TABLE stored AS SELECT list(i) AS numbers FROM range(?) t(i)", [numbers]
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def test_a_write_that_runs_out_of_memory_is_retried_under_twice_the_limit_and_lands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("SET memory_limit = '4MiB'")
    with pytest.raises(duckdb.OutOfMemoryException):
        one_list_of(1_000_000, con)  # about 8 MiB of integers: past 4 MiB
    assert not con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'stored'"
    ).fetchone()[0]

    with caplog.at_level(logging.WARNING, logger="ductwork"):
        with_memory_headroom(con, lambda: one_list_of(1_000_000, con), what="a test batch")

    assert con.execute("SELECT len(numbers) FROM stored").fetchone()[0] == 1_000_000
    assert memory_limit_bytes(con) >= 8 * MiB
    raised = [
        r.getMessage() for r in caplog.records if "ran out of DuckDB memory" in r.getMessage()
    ]
    assert raised and raised[0].startswith(
        "a test batch ran out of DuckDB memory under a limit of 4 MiB"
    )


def test_a_write_that_outgrows_every_doubling_fails_with_nothing_stored() -> None:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("SET memory_limit = '1MiB'")
    with pytest.raises(duckdb.OutOfMemoryException):
        with_memory_headroom(con, lambda: one_list_of(4_000_000, con), what="a test batch")
    assert memory_limit_bytes(con) == (1 << DOUBLINGS) * MiB
    assert not con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'stored'"
    ).fetchone()[0]


def test_a_write_that_fits_runs_once_under_the_limit_it_was_given() -> None:
    con = duckdb.connect()
    con.execute("SET memory_limit = '64MB'")
    calls: list[int] = []
    assert with_memory_headroom(con, lambda: calls.append(1) or 7, what="a test batch") == 7
    assert calls == [1]
    assert memory_limit_bytes(con) == int(61.0 * MiB)
