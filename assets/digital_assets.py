"""The warehouse family's digital assets: incremental on ``updatedAfter``, with reconciliation."""

import asyncio
from typing import Any, Literal

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present
from assets.ingest import (
    PendingPages,
    epoch_seconds,
    fetch,
    ingest_asset,
    run_metadata,
)
from assets.resources import UpstreamResource, open_warehouse
from ductwork.store.bookmarks import clear_bookmark, read_bookmark, resume_from, write_bookmark
from ductwork.store.columns import Columns
from ductwork.store.loading import Record, rows_table, text_or_none, timestamp_or_none
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.digital_asset_walk import (
    Key,
    PageWalkProgress,
    WalkReport,
    key_of,
    keyset_walk,
    page_walk,
)
from ductwork.upstream.schema_drift import DIGITAL_ASSET_RECORD, DriftTally
from ductwork.upstream.timestamps import canonical_or_received
from warehouse_sql import read_sql

# The upstream family's group, under the name already stored in run history.
GROUP = "warehouse"
KINDS = {"api", "duckdb"}
DIGITAL_ASSETS_STREAM = "warehouse_digital_assets"
# The progress of an unfinished page walk, kept beside the bookmark in stream_state.
PAGE_WALK_STATE = "warehouse_digital_assets.page_walk"
# A page walk commits its pages this many listed assets at a time. Each transaction pays for a
# history apply and a commit whatever its size: replaying a medium full sync's 200,000 assets
# took 16.8 s at one 1,000-asset page a transaction and 6.9 s at ten pages.
DIGITAL_ASSETS_PER_COMMIT = 10_000

DIGITAL_ASSET_SCHEMA = Columns(
    ("asset_id", "string"), ("sku", "string"), ("asset_type", "string"),
    ("title", "string"), ("url", "string"), ("mime_type", "string"),
    ("language", "string"), ("file_size_bytes", "int64"), ("created_at", "timestamp"),
    ("updated_at", "timestamp"), ("updated_at_text", "string"), ("record", "string"),
    ("deleted_at", "timestamp"), ("synced_at", "timestamp")
)  # fmt: skip


def digital_asset_row(record: Record) -> dict[str, Any]:
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
            con.register(
                "incoming_rows",
                rows_table(newest.values(), digital_asset_row, DIGITAL_ASSET_SCHEMA),
            )
            try:
                con.execute(read_sql("digital_assets_upsert"))
                con.execute(read_sql("digital_asset_history_apply"))
            finally:
                con.unregister("incoming_rows")
        if bookmark is not None:
            write_bookmark(
                con, DIGITAL_ASSETS_STREAM, {"updatedAt": bookmark[0], "assetId": bookmark[1]}
            )
        if progress is not None:
            # A list parameter, not an Arrow table: a page with no fresh asset (every page of a
            # run with nothing new) then builds no Arrow array, whose first use in a process
            # imports pandas.
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
            write_bookmark(
                con, DIGITAL_ASSETS_STREAM, {"updatedAt": bookmark[0], "assetId": bookmark[1]}
            )
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
    last = (canonical_or_received(rows[0][0]), str(rows[0][1]))
    return last if start is None or last > start else None


def _walk_saw_everything(con: duckdb.DuckDBPyConnection, progress: PageWalkProgress) -> bool:
    """One reported total on every page of the walk (before and after any resumption), and
    exactly that many distinct assets listed."""
    if len(progress.totals) > 1:
        return False
    distinct_ids = "SELECT count(DISTINCT asset_id) FROM digital_asset_walk_ids"
    listed = con.execute(distinct_ids).fetchall()[0][0]
    return listed == next(iter(progress.totals), 0)


def _mark_deleted(con: duckdb.DuckDBPyConnection, listed: set[str]) -> int:
    """Set ``deleted_at`` on live assets a complete listing no longer contains and close their
    current history versions, in one transaction."""
    import pyarrow as pa

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
    async with PendingPages(
        lambda pages: _upsert_pages(con, pages), DIGITAL_ASSETS_PER_COMMIT
    ) as held:
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
            con, DIGITAL_ASSETS_STREAM, ("updatedAt", "assetId"),
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


DIGITAL_ASSET_CHECKS: list[AssetRule] = [
    keys_unique_and_present(warehouse_digital_assets.key, "digital_assets", ["asset_id"]),
]
