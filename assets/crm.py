"""CRM family assets: the lead list (cursor paging) and the lead details."""

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.checks import AssetRule, keys_unique_and_present
from assets.ingest import (
    PendingPages,
    epoch_seconds,
    fetch,
    fetch_and_store,
    ingest_asset,
    run_metadata,
)
from assets.resources import UpstreamResource, open_warehouse
from ductwork.contract.encoding import dumps, format_datetime, parse_received_datetime
from ductwork.contract.encoding import quote_sku as quote_segment
from ductwork.contract.paths import LEADS
from ductwork.settings import SyncSettings, load
from ductwork.store.bookmarks import read_bookmark, resume_from, write_bookmark
from ductwork.store.columns import Columns
from ductwork.store.loading import Record, rows_table, text_or_none, timestamp_or_none
from ductwork.upstream.bounded_map import map_bounded
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.lead_cursor import Cursor, Sink, walk_leads
from ductwork.upstream.schema_drift import LEAD_DETAIL_RECORD, LEAD_RECORD, DriftTally
from warehouse_sql import read_sql

GROUP = "crm"
KINDS = {"api", "duckdb"}
LEADS_STREAM = "crm_leads"
# Lead details committed per transaction: each commit also versions history and trims the queue,
# a fixed cost per commit, so larger batches cost far less per lead, while a cut-short run
# still loses at most one batch of fetches.
DETAIL_BATCH = 10_000
# Lead-list pages are committed this many leads at a time, for the same reason: a medium full
# sync's lead step took 7.9 s at a page (1,000 leads) a transaction.
LEADS_PER_COMMIT = 10_000
# Workers fetching details, per request the client keeps in flight. Spare workers would keep
# every slot busy while one waits out a retry's back-off, but each freed slot then wakes a
# waiting worker: four per slot cost the client about 5 % more CPU per detail than one
# (`bench.client_cost --workers-per-slot 1 4`, the median of three runs). A healthy upstream
# makes no worker back off, and a struggling one is better asked less.
DETAIL_WORKERS_PER_SLOT = 1
# A lead detail as fetched: the id it was requested by, and the answer (None: a 404).
FetchedDetail = tuple[str, Record | None]
# A lead-list page held for commit: its leads, and the cursor after it (None: a re-read page,
# which moves no cursor).
HeldLeads = tuple[list[Record], Cursor | None]

LEAD_SCHEMA = Columns(
    ("id", "string"), ("created_at", "timestamp"), ("created_date_text", "string"),
    ("lead_number", "string"), ("status", "string"), ("lead_source", "string"),
    ("name", "string"), ("business_unit", "string"), ("state_code", "string"),
    ("postal_code", "string"), ("campaign", "string"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
DETAIL_SCHEMA = Columns(
    ("id", "string"), ("email", "string"), ("name", "string"),
    ("company", "string"), ("phone", "string"), ("category", "string"),
    ("status", "string"), ("purchase_status", "string"),
    ("assigned_contractor", "string"), ("assigned_bu", "string"),
    ("annual_revenue", "float64"), ("do_not_sell", "bool"), ("found", "bool"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
# A lead whose detail answered 404, and a batch's lead ids.
NOT_FOUND_SCHEMA = Columns(("id", "string"), ("found", "bool"), ("synced_at", "timestamp"))
ID_SCHEMA = Columns(("id", "string"))


def lead_row(lead: Record) -> dict[str, Any]:
    """Typed columns of a lead list item."""
    return {
        "id": str(lead["Id"]),
        "created_at": timestamp_or_none(lead.get("CreatedDate")),
        "created_date_text": text_or_none(lead.get("CreatedDate")),
        "lead_number": text_or_none(lead.get("LeadID__c")),
        "status": text_or_none(lead.get("Status")),
        "lead_source": text_or_none(lead.get("LeadSource")),
        "name": text_or_none(lead.get("Name")),
        "business_unit": text_or_none(lead.get("Business_Unit__c")),
        "state_code": text_or_none(lead.get("StateCode")),
        "postal_code": text_or_none(lead.get("PostalCode")),
        "campaign": text_or_none(lead.get("Campaign__c")),
    }


def detail_row(lead_id: str, detail: Record) -> dict[str, Any]:
    """Typed columns of a lead detail, keyed by ``lead_id``, the id it was requested by.

    The answer's own ``id`` may be missing, or name the lead in another form (Salesforce's
    18-character id for a 15-character one): the lead list's id is the key that joins the
    detail to its lead and takes it off the queue.
    """
    revenue = detail.get("annualRevenue")
    do_not_sell = detail.get("doNotSell")
    return {
        "id": lead_id,
        "email": text_or_none(detail.get("email")),
        "name": text_or_none(detail.get("name")),
        "company": text_or_none(detail.get("company")),
        "phone": text_or_none(detail.get("phone")),
        "category": text_or_none(detail.get("category")),
        "status": text_or_none(detail.get("status")),
        "purchase_status": text_or_none(detail.get("purchaseStatus")),
        "assigned_contractor": text_or_none(detail.get("assignedContractor")),
        "assigned_bu": text_or_none(detail.get("assignedBU")),
        "annual_revenue": float(revenue) if isinstance(revenue, int | float) else None,
        "do_not_sell": do_not_sell if isinstance(do_not_sell, bool) else None,
        "found": True,
    }


class LeadsConfig(dg.Config):
    """Run config of the lead sync (also settable in the UI's launchpad)."""

    mode: Literal["incremental", "reconcile"] = "incremental"
    # The default comes from DUCTWORK_LEAD_WINDOW_DAYS when the code location loads.
    window_days: int = Field(
        default=load(SyncSettings).lead_window_days,
        description="Days of recent leads to re-read (default: DUCTWORK_LEAD_WINDOW_DAYS).",
    )
    reset_cursor: bool = False


def _stored_as_read(con: duckdb.DuckDBPyConnection, leads: list[Record]) -> bool:
    """Whether every lead (one per id) is stored exactly as read and has its details: storing
    them would then change nothing.

    Asked of re-read pages before they are stored, since in a run with nothing new they all
    are. It builds no Arrow table: the first one a process builds imports pandas, a cost a
    no-change run need not pay.
    """
    stored = dict(
        con.execute(
            read_sql("leads_stored_with_details"), [[str(x["Id"]) for x in leads]]
        ).fetchall()
    )
    return len(stored) == len(leads) and all(
        stored.get(str(lead["Id"])) == dumps(lead).decode() for lead in leads
    )


def _store_leads(
    con: duckdb.DuckDBPyConnection, leads: list[Record], cursor: Cursor | None
) -> None:
    """Queue changed leads' details, upsert the page, version its history and move the cursor,
    in one transaction. Re-read leads (no cursor) stored exactly as read are left alone."""
    if cursor is None and _stored_as_read(con, leads):
        return
    import pyarrow.compute as pc

    table = rows_table(leads, lead_row, LEAD_SCHEMA)
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("incoming_rows", table)
        created = pc.min_max(table["created_at"])
        bounds = {"lo": created["min"].as_py(), "hi": created["max"].as_py()}
        con.execute(read_sql("leads_changed"), bounds)
        differing = con.sql(read_sql("leads_differing"), params=bounds).to_arrow_table()
        con.unregister("incoming_rows")
        if differing.num_rows:
            con.register("incoming_rows", differing)
            con.execute(read_sql("leads_upsert"))
            con.execute(read_sql("lead_history_apply"))
        if cursor is not None:
            write_bookmark(con, LEADS_STREAM, {"CreatedDate": cursor[0], "Id": cursor[1]})
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("incoming_rows")


def _store_lead_pages(con: duckdb.DuckDBPyConnection, pages: list[HeldLeads]) -> None:
    """``_store_leads`` for held pages, with the cursor after the last, in one transaction. A
    lead listed on two of them (its CreatedDate moved while the walk went on) is stored as
    last read: one statement cannot upsert a key twice."""
    latest = {str(lead["Id"]): lead for leads, _ in pages for lead in leads}
    _store_leads(con, list(latest.values()), pages[-1][1])


async def _sync_leads(
    client: UpstreamClient,
    con: duckdb.DuckDBPyConnection,
    start: Cursor | None,
    window_days: int | None,
) -> dict[str, int]:
    """New leads from the committed cursor on; then, re-read the recent window for changes.

    The counts include the schema drift of every lead read."""
    drift = DriftTally(LEAD_RECORD)

    def into(held: PendingPages[HeldLeads], *, moves_cursor: bool) -> Sink:
        """A walk's sink: count each page's drift and hold it, with its cursor when the walk
        is the one that moves it (a re-read of the window moves none)."""

        async def take(leads: list[Record], cursor: Cursor) -> None:
            drift.count(leads)
            await held.add((leads, cursor if moves_cursor else None), len(leads))

        return take

    def pages_held() -> PendingPages[HeldLeads]:
        # Pages read before a failure are committed too: a rerun resumes after them.
        return PendingPages(lambda pages: _store_lead_pages(con, pages), LEADS_PER_COMMIT)

    async with pages_held() as held:
        ahead = await walk_leads(client, into(held, moves_cursor=True), after=start)
    counts = {"pages": ahead.pages, "leads_new_or_resumed": ahead.records, "leads_revisited": 0}
    if start is not None and window_days is not None:
        since = parse_received_datetime(start[0]) - timedelta(days=window_days)
        async with pages_held() as held:
            window = await walk_leads(
                client,
                into(held, moves_cursor=False),
                created_after=format_datetime(since),
                stop_at=start,
            )
        counts["pages"] += window.pages
        counts["leads_revisited"] = window.records
    return {**counts, **drift.as_metadata()}


@ingest_asset(
    group=GROUP,
    description=(
        "CRM lead list, cursor-paged by (CreatedDate, Id) from the last committed cursor; "
        "re-reads a rolling window of recent leads for status changes; mode=reconcile re-reads "
        "all. Queues new and changed leads for their details."
    ),
)
def crm_leads(
    config: LeadsConfig, upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Mirror the lead list."""
    with open_warehouse(warehouse) as con:
        reconcile = config.mode == "reconcile"
        start = resume_from(
            con, LEADS_STREAM, ("CreatedDate", "Id"),
            reset=config.reset_cursor, from_scratch=reconcile,
        )  # fmt: skip
        window = None if reconcile else config.window_days
        fetched = fetch(upstream, lambda client: _sync_leads(client, con, start, window))
        if reconcile:
            # In the leads' stored order, which is their history's: see queued_lead_ids.
            con.execute(
                "INSERT INTO lead_detail_queue SELECT id FROM leads"
                " WHERE id NOT IN (SELECT id FROM lead_detail_queue) ORDER BY rowid"
            )
        total, queued = con.execute(
            "SELECT (SELECT count(*) FROM leads), (SELECT count(*) FROM lead_detail_queue)"
        ).fetchall()[0]
        cursor = read_bookmark(con, LEADS_STREAM) or {}
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            total,
            **fetched.value,
            details_queued=queued,
            mode=config.mode,
            cursor_created_date=cursor.get("CreatedDate", ""),
            cursor_id=cursor.get("Id", ""),
            cursor_epoch_s=epoch_seconds(cursor.get("CreatedDate")),
        )
    )


async def fetch_details(
    client: UpstreamClient, ids: list[str], workers_per_slot: int = DETAIL_WORKERS_PER_SLOT
) -> list[FetchedDetail]:
    """Fetch lead details concurrently (the client bounds requests in flight), each paired
    with the id it was requested by; ``workers_per_slot`` is for measuring other settings."""

    async def one(lead_id: str) -> FetchedDetail:
        answer = await client.get(
            f"{LEADS}/{quote_segment(lead_id)}", accept=frozenset({200, 404}), parse_json=True
        )
        return (lead_id, None if answer.status == 404 else answer.json())

    return await map_bounded(one, ids, workers_per_slot * client.concurrency)


def _store_details(
    con: duckdb.DuckDBPyConnection, details: list[FetchedDetail], drift: DriftTally
) -> None:
    """Upsert details under the ids they were requested by, version their history and take
    them off the queue, in one transaction."""
    found = [(lead_id, detail) for lead_id, detail in details if detail is not None]
    drift.count([detail for _, detail in found])
    now = datetime.now(UTC)
    table = DETAIL_SCHEMA.table(
        [
            {**detail_row(lead_id, detail), "record": dumps(detail).decode(), "synced_at": now}
            for lead_id, detail in found
        ]
    )
    missing = [lead_id for lead_id, detail in details if detail is None]
    placeholders = NOT_FOUND_SCHEMA.table(
        [{"id": i, "found": False, "synced_at": now} for i in missing]
    )
    con.execute("BEGIN TRANSACTION")
    try:
        for batch in (table, placeholders):
            if batch.num_rows:
                con.register("incoming_rows", batch)
                con.execute(read_sql("lead_details_upsert"))
                con.unregister("incoming_rows")
        ids = ID_SCHEMA.table([{"id": lead_id} for lead_id, _ in details])
        con.register("incoming_rows", ids)
        con.execute(read_sql("lead_history_apply"))
        con.unregister("incoming_rows")
        con.register("done_ids", ids)
        con.execute("DELETE FROM lead_detail_queue WHERE id IN (SELECT id FROM done_ids)")
        con.unregister("done_ids")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def queued_lead_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The ids in the detail queue, in the order they were queued.

    That is the order in which their leads' history versions were written, so each batch of
    details completes versions lying side by side. Drained in id order instead, every batch
    touched every part of ``lead_history`` and each checkpoint wrote all of it back: the
    step grew with the square of the leads (at 500,000 leads, 246 s against 200 s).
    """
    rows = con.execute("SELECT id FROM lead_detail_queue ORDER BY rowid").fetchall()
    return [row[0] for row in rows]


@ingest_asset(
    group=GROUP,
    deps=[crm_leads],
    description="Lead details (/crm/v1.1/leads/{id}) for every queued new or changed lead.",
)
def crm_lead_details(
    context: dg.AssetExecutionContext, upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Drain the detail queue in batches, each committed with its queue removals."""
    with open_warehouse(warehouse) as con:
        queued = queued_lead_ids(con)
        context.log.info("fetching details of %d leads", len(queued))
        drift = DriftTally(LEAD_DETAIL_RECORD)

        async def drain(client: UpstreamClient) -> int:
            await fetch_and_store(
                [queued[i : i + DETAIL_BATCH] for i in range(0, len(queued), DETAIL_BATCH)],
                lambda ids: fetch_details(client, ids),
                lambda details: _store_details(con, details, drift),
            )
            return len(queued)

        fetched = fetch(upstream, drain)
        total, missing = con.execute(
            "SELECT count(*), count(*) FILTER (NOT found) FROM lead_details"
        ).fetchall()[0]
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            total,
            details_fetched=fetched.value,
            not_found=missing,
            **drift.as_metadata(),
        )
    )


CRM_ASSETS: list[dg.AssetsDefinition] = [crm_leads, crm_lead_details]
CRM_CHECKS: list[AssetRule] = [
    keys_unique_and_present(crm_leads.key, "leads", ["id"]),
    keys_unique_and_present(crm_lead_details.key, "lead_details", ["id"]),
]
