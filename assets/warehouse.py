"""Warehouse family assets: digital assets (incremental, with reconciliation) and submittals."""

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import dagster as dg
import duckdb
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from assets.asset_walk import (
    Key,
    PageWalkProgress,
    WalkReport,
    key_of,
    keyset_walk,
    page_walk,
)
from assets.bookmarks import clear_bookmark, read_bookmark, resume_from, write_bookmark
from assets.checks import AssetRule, keys_unique_and_present
from assets.ingest import (
    Fetched,
    PendingPages,
    epoch_seconds,
    fetch,
    fetch_and_store,
    ingest_asset,
    run_metadata,
)
from assets.loading import (
    ListContent,
    Record,
    open_warehouse,
    rows_table,
    text_or_none,
    timestamp_or_none,
)
from assets.schema_drift import DIGITAL_ASSET_RECORD, SUBMITTAL_RECORD, DriftTally
from ductwork.contract.encoding import dumps
from ductwork.contract.paths import SUBMITTAL_DATA, UNIT_SLUGS
from pipelines.resources import UpstreamResource
from pipelines.upstream_client import RequestStats, UpstreamClient
from warehouse_sql import read_sql

GROUP = "warehouse"
KINDS = {"api", "duckdb"}
ASSETS_STREAM = "warehouse_digital_assets"
# The progress of an unfinished page walk, kept beside the bookmark in stream_state.
PAGE_WALK_STATE = "warehouse_digital_assets.page_walk"
TS = pa.timestamp("us", tz="UTC")
# The catalog lists (assets) whose tables the submittal requests derive from, and where the
# last complete pass over those requests is recorded.
SUBMITTAL_SOURCE_LISTS = ["pairings", *(slug.replace("-", "_") for slug in UNIT_SLUGS)]
SUBMITTALS_DERIVED = "warehouse_submittals.derived"
# A page walk commits its pages this many listed assets at a time. Each transaction pays for a
# history apply and a commit whatever its size: replaying a medium full sync's 200,000 assets
# took 16.8 s at one 1,000-asset page a transaction and 6.9 s at ten pages.
ASSETS_PER_COMMIT = 10_000

ASSET_SCHEMA = pa.schema(
    [("asset_id", pa.string()), ("sku", pa.string()), ("asset_type", pa.string()),
     ("title", pa.string()), ("url", pa.string()), ("mime_type", pa.string()),
     ("language", pa.string()), ("file_size_bytes", pa.int64()), ("created_at", TS),
     ("updated_at", TS), ("updated_at_text", pa.string()), ("record", pa.string()),
     ("deleted_at", TS), ("synced_at", TS)]
)  # fmt: skip


def asset_row(record: Record) -> dict[str, Any]:
    """Typed columns of a warehouse digital asset."""
    size = record.get("fileSizeBytes")
    return {
        "asset_id": str(record["assetId"]),
        "sku": text_or_none(record.get("sku")),
        "asset_type": text_or_none(record.get("assetType")),
        "title": text_or_none(record.get("title")),
        "url": text_or_none(record.get("url")),
        "mime_type": text_or_none(record.get("mimeType")),
        "language": text_or_none(record.get("language")),
        "file_size_bytes": size if isinstance(size, int) and not isinstance(size, bool) else None,
        "created_at": timestamp_or_none(record.get("createdAt")),
        "updated_at": timestamp_or_none(record.get("updatedAt")),
        "updated_at_text": text_or_none(record.get("updatedAt")),
        "deleted_at": None,
    }


class DigitalAssetsConfig(dg.Config):
    """Run config of the digital-assets sync (also settable in the UI's launchpad)."""

    mode: Literal["incremental", "reconcile"] = "incremental"
    reset_bookmark: bool = False


def _upsert(
    con: duckdb.DuckDBPyConnection,
    records: list[Record],
    bookmark: Key | None,
    progress: PageWalkProgress | None = None,
    listed: list[str] | None = None,
) -> None:
    """Upsert a batch and version its history, in one transaction with what it advances: the
    bookmark (a keyset walk) or a page walk's progress and the ids it ``listed``."""
    newest: dict[str, Record] = {}
    for record in records:  # a batch may list an asset twice; keep its latest copy
        seen = newest.get(str(record["assetId"]))
        if seen is None or key_of(record) >= key_of(seen):
            newest[str(record["assetId"])] = record
    con.execute("BEGIN TRANSACTION")
    try:
        if newest:
            con.register("incoming_rows", rows_table(newest.values(), asset_row, ASSET_SCHEMA))
            try:
                con.execute(read_sql("digital_assets_upsert"))
                con.execute(read_sql("digital_asset_history_apply"))
            finally:
                con.unregister("incoming_rows")
        if bookmark is not None:
            write_bookmark(con, ASSETS_STREAM, {"updatedAt": bookmark[0], "assetId": bookmark[1]})
        if progress is not None:
            # A list parameter, not an Arrow table: a page with no fresh asset (every page of a
            # run with nothing new) then builds no Arrow array, whose first use in a process
            # imports pandas (about 0.25 s).
            con.execute(read_sql("digital_asset_walk_ids_add"), [listed or []])
            write_bookmark(con, PAGE_WALK_STATE, progress.as_json())
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _end_page_walk(con: duckdb.DuckDBPyConnection, bookmark: Key | None) -> None:
    """Forget a page walk's progress and, when it proved complete, move the bookmark to its
    last asset, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        if bookmark is not None:
            write_bookmark(con, ASSETS_STREAM, {"updatedAt": bookmark[0], "assetId": bookmark[1]})
        clear_bookmark(con, PAGE_WALK_STATE)
        con.execute("DELETE FROM digital_asset_walk_ids")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _new_page_walk(con: duckdb.DuckDBPyConnection, start: Key | None) -> PageWalkProgress:
    """A page walk from ``start``, forgetting any unfinished one."""
    _end_page_walk(con, None)
    return PageWalkProgress(start)


def _unfinished_walk(con: duckdb.DuckDBPyConnection, start: Key | None) -> PageWalkProgress:
    """The committed progress of a page walk from ``start`` that a run did not finish, or a
    new walk when there is none from that start."""
    saved = read_bookmark(con, PAGE_WALK_STATE)
    progress = None if saved is None else PageWalkProgress.from_json(saved)
    if progress is not None and progress.start == start:
        return progress
    return _new_page_walk(con, start)


def _walk_last_key(con: duckdb.DuckDBPyConnection, start: Key | None) -> Key | None:
    """Where a complete page walk moves the bookmark: its newest listed asset, if later than
    ``start`` (the walk's pages may have been listed by more than one run)."""
    rows = con.execute(read_sql("digital_asset_walk_last")).fetchall()
    if not rows:
        return None
    last = (str(rows[0][0]), str(rows[0][1]))
    return last if start is None or last > start else None


def _walk_saw_everything(con: duckdb.DuckDBPyConnection, progress: PageWalkProgress) -> bool:
    """One reported total on every page of the walk (before and after any resumption), and
    exactly that many distinct assets listed."""
    if len(progress.totals) > 1:
        return False
    listed = con.execute("SELECT count(*) FROM digital_asset_walk_ids").fetchall()[0][0]
    return listed == next(iter(progress.totals), 0)


def _mark_deleted(con: duckdb.DuckDBPyConnection, listed: set[str]) -> int:
    """Set ``deleted_at`` on live assets a complete listing no longer contains and close their
    current history versions, in one transaction."""
    ids = pa.table({"asset_id": pa.array(sorted(listed), pa.string())})
    con.register("listed_ids", ids)
    con.execute("BEGIN TRANSACTION")
    try:
        rows = con.execute(read_sql("digital_assets_mark_deleted")).fetchall()
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("listed_ids")
    return rows[0][0] if rows else 0


# A page-walk page held for commit: its fresh assets, the ids it listed, the walk's progress
# as of that page.
HeldPage = tuple[list[Record], list[str], PageWalkProgress]


def _upsert_pages(con: duckdb.DuckDBPyConnection, pages: list[HeldPage]) -> None:
    """Upsert held page-walk pages with the progress of the last, in one transaction."""
    records = [record for fresh, _, _ in pages for record in fresh]
    listed = [asset_id for _, ids, _ in pages for asset_id in ids]
    _upsert(con, records, None, pages[-1][2], listed)


async def _sync_assets(
    client: UpstreamClient,
    con: duckdb.DuckDBPyConnection,
    start: Key | None,
    resume: bool,
    drift: DriftTally,
) -> tuple[WalkReport, str, int]:
    """Page walk first (resumed at the next page when ``resume`` and an earlier run from the
    same start was cut short); if changes disturbed it, a keyset walk from the same start.
    Every record read is counted in ``drift``.

    Returns the walk's report, which walk finished, and the page the walk resumed after.
    """
    progress = await asyncio.to_thread(_unfinished_walk if resume else _new_page_walk, con, start)
    resumed_after = progress.pages_done

    async def page_sink(records: list[Record], listed: list[str], walked: PageWalkProgress) -> None:
        drift.count(records)
        await held.add((records, listed, walked.copy()), len(listed))

    # Pages read before a failure are committed too: a rerun resumes after them.
    async with PendingPages(lambda pages: _upsert_pages(con, pages), ASSETS_PER_COMMIT) as held:
        report = await page_walk(client, progress, page_sink)
        if resumed_after == 0 and not held.committed and not report.records and report.consistent:
            # Nothing after the bookmark, and this run saw the whole walk: its progress would
            # be written only to be cleared again. A run that writes nothing leaves the
            # warehouse file as the last publish found it (see ``snapshots.publish``).
            held.discard()
            return report, "pages", resumed_after
    complete = await asyncio.to_thread(_walk_saw_everything, con, progress)
    if complete:
        last = await asyncio.to_thread(_walk_last_key, con, start)
        await asyncio.to_thread(_end_page_walk, con, last)
        report.last = last
        return report, "pages", resumed_after
    await asyncio.to_thread(_end_page_walk, con, None)

    async def sink(records: list[Record], bookmark: Key | None) -> None:
        drift.count(records)
        await asyncio.to_thread(_upsert, con, records, bookmark)

    repair = await keyset_walk(client, start, sink)
    repair.pages += report.pages
    return repair, "keyset", resumed_after


@ingest_asset(
    group=GROUP,
    description=(
        "Warehouse digital assets, incremental on a (updatedAt, assetId) bookmark committed "
        "with the rows; a walk cut short resumes at its next page; mode=reconcile lists "
        "everything and marks vanished assets deleted."
    ),
)
def warehouse_digital_assets(
    config: DigitalAssetsConfig, upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Upsert new and changed digital assets (and, reconciling, flag deleted ones)."""
    with open_warehouse(warehouse) as con:
        reconcile = config.mode == "reconcile"
        start = resume_from(
            con, ASSETS_STREAM, ("updatedAt", "assetId"),
            reset=config.reset_bookmark, from_scratch=reconcile,
        )  # fmt: skip
        drift = DriftTally(DIGITAL_ASSET_RECORD)
        fetched = fetch(
            upstream, lambda client: _sync_assets(client, con, start, not reconcile, drift)
        )
        report, walk, resumed_after = fetched.value
        deleted = _mark_deleted(con, report.ids) if reconcile else 0
        live = con.execute(
            "SELECT count(*) FROM digital_assets WHERE deleted_at IS NULL"
        ).fetchall()[0][0]
    bookmark = report.last or start
    # Only a complete listing reports the stream's total; an incremental walk sees a part.
    total = (
        {"reported_total": next(iter(report.totals))}
        if reconcile and len(report.totals) == 1
        else {}
    )
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            live,
            rows_upserted=report.records,
            rows_deleted=deleted,
            pages=report.pages,
            walk=walk,
            resumed_after_page=resumed_after,
            mode=config.mode,
            bookmark_updated_at=bookmark[0] if bookmark else "",
            bookmark_epoch_s=epoch_seconds(bookmark[0] if bookmark else None),
            **total,
            **drift.as_metadata(),
        )
    )


SUBMITTAL_SCHEMA = pa.schema(
    [("request_key", pa.string()), ("idu", pa.string()), ("odu", pa.string()),
     ("found", pa.bool_()), ("ahri_number", pa.string()), ("document_url", pa.string()),
     ("updated_at", TS), ("source_signature", pa.string()), ("record", pa.string()),
     ("synced_at", TS)]
)  # fmt: skip
SUBMITTAL_BATCH = 500


class SubmittalsConfig(dg.Config):
    """Run config of the submittal sync."""

    mode: Literal["incremental", "reconcile"] = "incremental"


async def _fetch_submittals(
    client: UpstreamClient,
    requests: list[tuple[str, str | None, str | None, str]],
    drift: DriftTally,
) -> list[dict[str, Any]]:
    """Fetch one batch of submittals concurrently; a 404 becomes a row with found = false.
    Every submittal found is counted in ``drift``."""

    async def one(key: str, idu: str | None, odu: str | None, signature: str) -> dict[str, Any]:
        query = {name: value for name, value in (("idu", idu), ("odu", odu)) if value}
        answer = await client.get(
            SUBMITTAL_DATA, query, accept=frozenset({200, 404}), parse_json=True
        )
        data = answer.json().get("data") if answer.status == 200 else None
        found = isinstance(data, dict) and answer.status == 200
        if found:
            drift.count([data])
        return {
            "request_key": key,
            "idu": idu,
            "odu": odu,
            "found": found,
            "ahri_number": text_or_none(data.get("ahriNumber")) if found else None,
            "document_url": text_or_none(data.get("documentUrl")) if found else None,
            "updated_at": timestamp_or_none(data.get("updatedAt")) if found else None,
            "source_signature": signature,
            "record": dumps(data).decode() if found else None,
            "synced_at": datetime.now(UTC),
        }

    return list(await asyncio.gather(*(one(*request) for request in requests)))


def _store_submittals(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows, schema=SUBMITTAL_SCHEMA)
    con.register("incoming_rows", table)
    try:
        con.execute(read_sql("submittals_upsert"))
    finally:
        con.unregister("incoming_rows")


@ingest_asset(
    group=GROUP,
    deps=SUBMITTAL_SOURCE_LISTS,
    description=(
        "Submittal data for every Pairing (P1/P2 SRNs) and Standalone unit; incremental runs "
        "fetch only requests that are new or whose pairing or units changed."
    ),
)
def warehouse_submittals(
    config: SubmittalsConfig, upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Mirror submittal data, one request per (idu, odu).

    The requests derive from the pairings and unit lists. When none of those changed since a
    pass fetched every request it derived, and the table holds as many rows as that pass left,
    there is nothing to derive or fetch (a reconciliation fetches everything regardless).
    """
    drift = DriftTally(SUBMITTAL_RECORD)
    counted = "SELECT count(*), count(*) FILTER (found) FROM submittals"
    with open_warehouse(warehouse) as con:
        sources = _submittal_sources(con)
        last = read_bookmark(con, SUBMITTALS_DERIVED)
        total, found = con.execute(counted).fetchall()[0]
        if (
            config.mode != "reconcile"
            and last is not None
            and (last["sources"], last["rows"]) == (sources, total)
        ):
            done = _SubmittalPass(Fetched(None, RequestStats(), 0.0), last["requests"], 0, 0)
        else:
            done = _submittal_pass(config, upstream, con, drift)
            total, found = con.execute(counted).fetchall()[0]
            bookmark = {"sources": sources, "rows": total, "requests": done.derived}
            write_bookmark(con, SUBMITTALS_DERIVED, bookmark)
    return dg.MaterializeResult(
        metadata=run_metadata(
            done.fetched,
            found,
            requests_derived=done.derived,
            submittals_fetched=done.requested,
            not_found=total - found,
            rows_deleted=done.deleted,
            mode=config.mode,
            **drift.as_metadata(),
        )
    )


@dataclass(frozen=True)
class _SubmittalPass:
    """What one pass over the derived submittal requests did."""

    fetched: Fetched[None]
    derived: int  # requests the catalog implies
    requested: int  # of them, fetched (new, changed, or all in a reconciliation)
    deleted: int  # rows whose request the catalog no longer implies


def _submittal_pass(
    config: SubmittalsConfig,
    upstream: UpstreamResource,
    con: duckdb.DuckDBPyConnection,
    drift: DriftTally,
) -> _SubmittalPass:
    """Derive the requests, fetch those not stored as derived, delete those no longer implied."""
    wanted = con.execute(read_sql("submittal_requests")).fetchall()
    have = dict(con.execute("SELECT request_key, source_signature FROM submittals").fetchall())
    todo = [row for row in wanted if config.mode == "reconcile" or have.get(row[0]) != row[3]]

    async def run(client: UpstreamClient) -> None:
        await fetch_and_store(
            [todo[i : i + SUBMITTAL_BATCH] for i in range(0, len(todo), SUBMITTAL_BATCH)],
            lambda requests: _fetch_submittals(client, requests, drift),
            lambda rows: _store_submittals(con, rows),
        )

    fetched = fetch(upstream, run)
    removed = con.execute(
        "DELETE FROM submittals WHERE request_key NOT IN (SELECT unnest(?::VARCHAR[]))",
        [[row[0] for row in wanted]],
    ).fetchall()[0][0]
    return _SubmittalPass(fetched, len(wanted), len(todo), removed)


def _submittal_sources(con: duckdb.DuckDBPyConnection) -> str:
    """A digest of what the submittal requests derive from: the stored content of the lists
    they read, and the statement that derives them."""
    keys = [ListContent.bookmark_key_of(name) for name in SUBMITTAL_SOURCE_LISTS]
    found = con.execute(
        "SELECT list(stream || '=' || bookmark ORDER BY stream) FROM stream_state "
        "WHERE stream IN (SELECT unnest(?::VARCHAR[]))",
        [keys],
    ).fetchall()[0][0]
    text = "\n".join([read_sql("submittal_requests"), *(found or [])])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


WAREHOUSE_ASSETS: list[dg.AssetsDefinition] = [warehouse_digital_assets, warehouse_submittals]
WAREHOUSE_CHECKS: list[AssetRule] = [
    keys_unique_and_present(warehouse_digital_assets.key, "digital_assets", ["asset_id"]),
    keys_unique_and_present(warehouse_submittals.key, "submittals", ["request_key"]),
]
