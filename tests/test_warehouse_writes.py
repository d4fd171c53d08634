"""How a run holds the working warehouse, how pages of leads and batches of assets are written
to it, and in which order and form the sync's bookkeeping tables (the detail queue, a walk's
listed ids) are kept.

Real DuckDB files; the lock is probed from another process, as any other reader would meet it.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.resources import Warehouse, open_warehouse
from ductwork.streams.crm import LEAD_DETAIL_RECORD
from ductwork.streams.registry import DIGITAL_ASSETS, LEADS
from ductwork.sync.context import SyncContext
from ductwork.sync.cursor_list import Listing
from ductwork.sync.updated_after import HeldPage, Walker
from ductwork.upstream.schema_drift import DriftTally
from ductwork.upstream.updated_after_walk import PageWalkProgress
from warehouse_sql import stream_section

# The writes of the lead list and its details, and of the digital assets, called one at a
# time as the steps call them (unit tests of the writes, with no run around them).
LIST, DETAILS = (step.reader for step in LEADS.steps)
ASSETS = DIGITAL_ASSETS.steps[0]


def _store_leads(con: duckdb.DuckDBPyConnection, leads: list, cursor: object) -> int:
    return LIST.store(con, LEADS.assets[0], leads, cursor)


def _walker(con: duckdb.DuckDBPyConnection) -> Walker:
    return Walker(ASSETS.reader, ASSETS.asset, SyncContext(con, upstream=None))


PROBE = "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=True).close()"


def another_process_can_open(path: Path) -> bool:
    """Whether a reader in another process gets the file (DuckDB refuses it while a
    read-write instance holds it)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, timeout=120
    )
    return done.returncode == 0


def test_a_run_holds_the_warehouse_between_its_steps_and_releases_it_when_it_fails(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data" / "warehouse.duckdb"
    seen: dict[str, bool] = {}

    @dg.asset
    def writes(warehouse: DuckDBResource) -> None:
        with open_warehouse(warehouse) as con:
            con.execute("CREATE TABLE written AS SELECT 1 AS x")
        # this step's own connection is closed: what still holds the file is the run
        seen["held_after_the_step_closed"] = not another_process_can_open(path)

    @dg.asset(deps=[writes])
    def fails(warehouse: DuckDBResource) -> None:
        with open_warehouse(warehouse):
            raise RuntimeError("a step that fails")

    result = dg.materialize(
        [writes, fails],
        resources={"warehouse": Warehouse(database=str(path))},
        raise_on_error=False,
    )

    assert not result.success
    assert seen == {"held_after_the_step_closed": True}
    assert another_process_can_open(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT x FROM written").fetchall() == [(1,)]


def lead(lead_id: str, created: str) -> dict[str, str]:
    return {"Id": lead_id, "CreatedDate": created, "Status": "Open", "Name": lead_id}


def test_a_lead_whose_created_date_moved_is_updated_in_place_and_versioned(
    tmp_path: Path,
) -> None:
    """A page is compared only with stored leads inside its own CreatedDate range; a lead
    that moved out of that range upstream must still be updated, not duplicated or lost."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    january, june, july = (f"2025-{m}-01T00:00:00.000Z" for m in ("01", "06", "07"))
    with open_warehouse(resource) as con:
        _store_leads(con, [lead("L1", january), lead("L2", june)], None)
        _store_leads(con, [lead("L2", june), lead("L1", july)], None)

        stored = con.execute("SELECT id, created_date_text FROM leads ORDER BY id").fetchall()
        versions = con.execute(
            "SELECT id, count(*) FROM lead_history GROUP BY id ORDER BY id"
        ).fetchall()
        queued = con.execute("SELECT count(*) FROM lead_detail_queue").fetchall()[0][0]

    assert stored == [("L1", july), ("L2", june)]
    assert versions == [("L1", 2), ("L2", 1)]
    assert queued == 2  # neither has details yet


def test_lead_details_are_drained_in_the_order_their_leads_were_queued_not_by_id(
    tmp_path: Path,
) -> None:
    """Each page's history versions are written together; draining the queue page by page
    keeps a batch of details on the versions of a few pages instead of all of them."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    january, june = (f"2025-{m}-01T00:00:00.000Z" for m in ("01", "06"))
    first_page = [lead("L9", january), lead("L5", january)]
    second_page = [lead("L1", june), lead("L7", june)]
    with open_warehouse(resource) as con:
        _store_leads(con, first_page, None)
        _store_leads(con, second_page, None)
        con.execute("DELETE FROM lead_detail_queue WHERE id = 'L5'")
        _store_leads(con, [lead("L3", june)], None)
        order = DETAILS.queued(con).to_pylist()

    assert order[0] == "L9"
    assert set(order[1:3]) == {"L1", "L7"}  # one page: its order within is the database's
    assert order[3:] == ["L3"]


def test_a_batch_of_details_completes_the_version_of_each_of_its_leads_dated_or_not(
    tmp_path: Path,
) -> None:
    """The history apply reads ``leads`` only between the earliest and latest CreatedDate
    stored for the batch's leads, and the leads without one. A batch of details naming the
    earliest lead, the latest, one between and one without a date completes all four."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    undated = {"Id": "L4", "Status": "Open", "Name": "L4"}
    dates = ("2019-03-01", "2021-07-01", "2025-11-01")
    leads = [lead(f"L{n}", f"{day}T00:00:00.000Z") for n, day in enumerate(dates, 1)]
    with open_warehouse(resource) as con:
        _store_leads(con, [lead("L0", "2018-01-01T00:00:00.000Z")], None)  # outside the batch
        _store_leads(con, [*leads, undated], None)
        details = [(f"L{n}", {"status": "Qualified"}) for n in (1, 2, 3, 4)]
        DETAILS.write(con, DETAILS.rows(details, DriftTally(LEAD_DETAIL_RECORD)))
        current = con.execute(
            "SELECT id, detail_found, detail_status FROM lead_history WHERE is_current ORDER BY id"
        ).fetchall()
        versions = con.execute("SELECT count(*) FROM lead_history").fetchall()[0][0]

    assert current == [
        ("L0", None, None),
        ("L1", True, "Qualified"),
        ("L2", True, "Qualified"),
        ("L3", True, "Qualified"),
        ("L4", True, "Qualified"),
    ]
    assert versions == 5  # completed in place: first details are not a change


def test_a_lead_listed_again_after_its_deletion_opens_a_version_after_its_last_one_ended(
    tmp_path: Path,
) -> None:
    """A deleted lead has no current version; listed again (deleted by mistake upstream, then
    restored), its new version opens when its last one ended, not at its CreatedDate: the
    versions of a lead never overlap."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    with open_warehouse(resource) as con:
        _store_leads(con, [lead("L1", "2025-01-01T00:00:00.000Z")], None)
        LIST.start_listing(con)
        LIST.mark_unlisted_deleted(con, Listing(complete=True))  # a listing without L1
        gone = con.execute("SELECT count(*) FROM leads").fetchall()[0][0]
        current = con.execute("SELECT count(*) FROM lead_history WHERE is_current").fetchall()
        _store_leads(con, [lead("L1", "2025-01-01T00:00:00.000Z")], None)
        versions = con.execute(
            "SELECT valid_from, valid_to, is_current FROM lead_history WHERE id = 'L1' "
            "ORDER BY valid_from"
        ).fetchall()

    assert gone == 0 and current == [(0,)]
    assert [v[2] for v in versions] == [False, True]
    assert versions[1][0] >= versions[0][1]  # no overlap with the version the deletion closed


def test_a_page_walk_that_listed_an_asset_twice_still_saw_every_asset_once(
    tmp_path: Path,
) -> None:
    """Listed ids are stored without looking for earlier copies (that look scanned the whole
    table for every page); the walk's check counts each asset once."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    with open_warehouse(resource) as con:
        # DA-2's updatedAt moved while the walk went on: the next page lists it again.
        for page in (["DA-1", "DA-2"], ["DA-3", "DA-2"]):
            con.execute(stream_section(DIGITAL_ASSETS.sql, "walk_ids_add"), [page])
        rows = con.execute("SELECT count(*) FROM digital_asset_walk_ids").fetchall()[0][0]
        saw_three = _walker(con).walk_saw_everything(PageWalkProgress(None, 2, {3}))
        saw_four = _walker(con).walk_saw_everything(PageWalkProgress(None, 2, {4}))

    assert rows == 4
    assert saw_three and not saw_four


def asset(asset_id: str, updated: str, title: str) -> dict[str, str]:
    return {"assetId": asset_id, "title": title, "updatedAt": updated}


def _held_page(walker: Walker, records: list[dict[str, str]], pages_done: int) -> HeldPage:
    listed = [record["assetId"] for record in records]
    return walker.hold(records, listed, PageWalkProgress(None, pages_done))


def test_held_pages_that_list_an_asset_twice_store_its_latest_copy_once(tmp_path: Path) -> None:
    """Pages are held as rows, not records: the batch keeps, per asset, the row of its
    greatest (updatedAt, assetId), the later page's on a tie; a page with no fresh record
    holds no rows. Rows are stamped when stored, not when their page arrived."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    march, april = (f"2025-{m}-01T00:00:00.000Z" for m in ("03", "04"))
    with open_warehouse(resource) as con:
        walker = _walker(con)
        pages = [
            _held_page(walker, [asset("DA-1", april, "newer"), asset("DA-2", march, "a")], 1),
            _held_page(walker, [], 2),
            _held_page(walker, [asset("DA-1", march, "older"), asset("DA-2", march, "b")], 3),
        ]
        built = datetime.now(UTC)
        walker.upsert_pages(pages)
        stored = con.execute("SELECT asset_id, title FROM digital_assets ORDER BY 1").fetchall()
        stamps = con.execute("SELECT min(synced_at) FROM digital_assets").fetchall()[0][0]
        versions = con.execute("SELECT count(*) FROM digital_asset_history").fetchall()[0][0]
        listed = con.execute("SELECT DISTINCT asset_id FROM digital_asset_walk_ids ORDER BY 1")
        listed_ids = [row[0] for row in listed.fetchall()]

    assert stored == [("DA-1", "newer"), ("DA-2", "b")]
    assert stamps >= built
    assert versions == 2
    assert listed_ids == ["DA-1", "DA-2"]


def test_a_batch_mixing_new_and_stored_assets_replaces_and_versions_only_the_stored_ones(
    tmp_path: Path,
) -> None:
    """The replace and the history lookups take only the assets that had a stored copy: one in
    a batch with a new asset is still replaced once, and its current version closed."""
    resource = DuckDBResource(database=str(tmp_path / "warehouse.duckdb"))
    march, april = (f"2025-{m}-01T00:00:00.000Z" for m in ("03", "04"))
    with open_warehouse(resource) as con:
        _walker(con).upsert([asset("DA-1", march, "first")], None)
        _walker(con).upsert([asset("DA-1", april, "second"), asset("DA-2", april, "new")], None)
        stored = con.execute("SELECT asset_id, title FROM digital_assets ORDER BY 1").fetchall()
        versions = con.execute(
            "SELECT asset_id, title, is_current FROM digital_asset_history ORDER BY 1, valid_from"
        ).fetchall()

    assert stored == [("DA-1", "second"), ("DA-2", "new")]
    assert versions == [
        ("DA-1", "first", False),
        ("DA-1", "second", True),
        ("DA-2", "new", True),
    ]
