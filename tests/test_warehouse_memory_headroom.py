"""A write that runs out of DuckDB's memory limit is rolled back and retried under a raised
limit, so that a small limit keeps the sync's memory low without failing it at larger scales.

On real DuckDB databases (the out-of-memory error is DuckDB's own): the helper alone, the lead
list's write as the sync calls it, the whole-table reads of the lead details' and the
submittals' steps, and the publish (its hashing and its recording), on a warehouse opened as a
step opens it. Unit tests: the write, the reads and the publish are called directly, with no run
of ``ductwork sync`` around them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from assets.resources import open_warehouse
from ductwork import snapshots
from ductwork.streams.crm import LEAD_PAGING
from ductwork.streams.registry import LEADS, SUBMITTALS
from ductwork.sync.cursor_list import HeldPage
from ductwork.warehouse.memory_headroom import DOUBLINGS, memory_limit_bytes, with_memory_headroom
from ductwork.warehouse.sync_state import read_state

MiB = 2**20
T = TypeVar("T")
LEAD_LIST = LEADS.steps[0].reader


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


def test_a_page_of_leads_that_outgrows_the_limit_lands_once_where_the_sync_writes_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lead list's write as the sync calls it (``store_pages``), on a real warehouse under
    a limit the held pages outgrow: rolled back, retried under a raised limit, each lead stored,
    versioned and queued for its details once, the resume point at the last page's cursor; the
    next step opens the warehouse under the configured limit again."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    leads = [
        {"Id": f"L{n:05d}", "CreatedDate": f"2025-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z",
         "Status": "Open", "Name": "x" * 200}
        for n in range(2_000)
    ]  # fmt: skip
    cursor = (leads[-1]["CreatedDate"], leads[-1]["Id"])
    pages: list[HeldPage] = [(leads[:1_000], None), (leads[1_000:], cursor)]
    with open_warehouse(resource) as con:
        configured = memory_limit_bytes(con)
        con.execute("SET memory_limit = '4MiB'")  # well under what these pages need
        with caplog.at_level(logging.WARNING, logger="ductwork"):
            stored = LEAD_LIST.store_pages(con, LEADS.assets[0], pages)
        raised = memory_limit_bytes(con)
        counts = con.execute(
            "SELECT (SELECT count(*) FROM leads), (SELECT count(DISTINCT id) FROM leads), "
            "(SELECT count(*) FROM lead_history), (SELECT count(*) FROM lead_detail_queue)"
        ).fetchone()
        resume_point = read_state(con, LEADS.assets[0])
    with open_warehouse(resource) as con:
        reopened = memory_limit_bytes(con)

    retries = [r for r in caplog.records if "ran out of DuckDB memory" in r.getMessage()]
    assert retries and retries[0].getMessage().startswith("crm_leads: a batch ran out")
    assert raised >= 8 * MiB
    assert stored == 2_000
    assert counts == (2_000, 2_000, 2_000, 2_000)
    assert resume_point == dict(zip(LEAD_PAGING.members, cursor, strict=True))
    assert reopened == configured


def read_under(
    con: duckdb.DuckDBPyConnection,
    limit: str,
    read: Callable[[], T],
    caplog: pytest.LogCaptureFixture,
) -> tuple[T, int, str]:
    """``read`` under the DuckDB limit ``limit``: what it returned, the limit it ended under and
    the first out-of-memory warning it logged."""
    con.execute(f"SET memory_limit = '{limit}'")
    with caplog.at_level(logging.WARNING, logger="ductwork"):
        found = read()
    retries = [
        r.getMessage() for r in caplog.records if "ran out of DuckDB memory" in r.getMessage()
    ]
    assert retries, "the read did not run out of memory under the limit"
    return found, memory_limit_bytes(con), retries[0]


def test_a_detail_queue_that_outgrows_the_limit_is_read_whole_under_a_raised_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lead details' queue read as its step reads it, on a real warehouse under a limit its
    ids outgrow: read again under a raised limit, every id once and in the order queued."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    details = LEADS.steps[1].reader
    with open_warehouse(resource) as con:
        ids = "SELECT printf('L%07d', 300000 - i) FROM range(300000) t(i)"
        con.execute(f"INSERT INTO lead_detail_queue {ids}")
        # 2 MiB: well under what the ids need.
        queued, raised, warning = read_under(con, "2MiB", partial(details.queued, con), caplog)

    assert warning.startswith("reading the detail queue ran out")
    assert raised >= 4 * MiB
    assert len(queued) == 300_000
    assert queued[0].as_py() == "L0300000" and queued[-1].as_py() == "L0000001"


def test_submittal_requests_that_outgrow_the_limit_are_derived_whole_under_a_raised_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The submittals' requests derived as their step derives them, on a real warehouse whose
    pairings outgrow the limit: derived again under a raised limit, one request per pairing."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    submittals = SUBMITTALS.steps[0].reader
    with open_warehouse(resource) as con:
        con.execute(
            "INSERT INTO pairings SELECT i, 'Pairing', now(), '{}', now() FROM range(20000) t(i)"
        )
        con.execute(
            "INSERT INTO pairing_products SELECT i, p, 'SKU' || i, p || '-SRN-' || i, "
            "CASE p WHEN 'P1' THEN 'indoor-units' ELSE 'outdoor-units' END "
            "FROM range(20000) t(i), (VALUES ('P1'), ('P2')) s(p)"
        )
        con.execute("CHECKPOINT")  # the rows written, so that the limit can be lowered
        # 4 MiB: well under what the requests need.
        derive = partial(submittals.derived, con)
        requests, raised, warning = read_under(con, "4MiB", derive, caplog)

    assert warning.startswith("deriving the requests ran out")
    assert raised >= 8 * MiB
    assert len(requests) == 20_000
    assert requests[0][:3] == ("P1-SRN-0|P2-SRN-0", "P1-SRN-0", "P2-SRN-0")


def memory_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The out-of-memory warnings logged so far."""
    return [r.getMessage() for r in caplog.records if "ran out of DuckDB memory" in r.getMessage()]


def test_a_publish_under_a_limit_its_hashing_outgrows_goes_through_under_a_raised_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The publish as the sync calls it, on a real warehouse of 100,000 leads changed since the
    last publish, under 2 MiB: the rows' hashes and the fingerprint taken again under a raised
    limit, and the new snapshot current with the changed leads, recorded once."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    folder = tmp_path / "snapshots"
    record = "json_object('Id', printf('L%07d', i), 'Name', repeat(?, 200))"
    with open_warehouse(resource, parallel=True) as con:
        con.execute(
            f"INSERT INTO leads (id, record, synced_at) SELECT printf('L%07d', i), {record}, "
            "now() FROM range(100000) t(i)",
            ["x"],
        )
        first = snapshots.publish(con, folder).snapshot
        con.execute("UPDATE leads SET record = json_object('Id', id, 'Name', repeat('y', 200))")
        con.execute("CHECKPOINT")  # the rows written, so that the limit can be lowered
        con.execute("SET memory_limit = '2MiB'")
        with caplog.at_level(logging.WARNING, logger="ductwork"):
            second = snapshots.publish(con, folder).snapshot
        raised = memory_limit_bytes(con)
        recorded = con.execute("SELECT count(*) FROM history.publishes").fetchone()[0]

    assert memory_warnings(caplog)[0].startswith("fingerprinting the warehouse ran out")
    assert raised >= 4 * MiB
    assert second.version != first.version
    assert snapshots.current(folder) == second
    assert recorded == 2
    with duckdb.connect(str(second.path), read_only=True) as published:
        names = published.execute("SELECT DISTINCT record->>'Name' FROM leads").fetchall()
    assert names == [("y" * 200,)]


def test_a_publish_whose_recording_outgrows_the_limit_is_rolled_back_and_recorded_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The publish's recording is one transaction: here an erasure run in it (as ``ductwork
    forget`` runs one) outgrows 16 MiB; it is rolled back, run again under a raised limit, and
    what it wrote is there once; the snapshot is published."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    folder = tmp_path / "snapshots"
    runs: list[int] = []

    def hungry_erasure(con: duckdb.DuckDBPyConnection, seq: int) -> None:
        runs.append(seq)
        con.execute("CREATE TABLE erased_marker AS SELECT ?::BIGINT AS seq", [seq])
        # About 32 MiB of integers in one list (a list aggregate cannot spill).
        con.execute(
            "CREATE TEMP TABLE hungry AS SELECT list(i) AS numbers FROM range(4000000) t(i)"
        )
        con.execute("DROP TABLE hungry")

    with open_warehouse(resource, parallel=True) as con:
        con.execute("SET memory_limit = '16MiB'")
        with caplog.at_level(logging.WARNING, logger="ductwork"):
            published = snapshots.publish(con, folder, erase=hungry_erasure).snapshot
        raised = memory_limit_bytes(con)
        marked = con.execute("SELECT seq FROM erased_marker").fetchall()
        recorded = con.execute("SELECT count(*) FROM history.publishes").fetchone()[0]

    assert memory_warnings(caplog)[0].startswith("recording the publish ran out")
    assert len(runs) >= 2 and len(set(runs)) == 1  # the same publish, tried again
    assert raised >= 32 * MiB
    assert marked == [(runs[0],)] and recorded == 1
    assert snapshots.current(folder) == published
