"""Streams read incrementally on ``updatedAfter`` from a (updatedAt, id) resume point, and
listed whole by a reconciliation, which marks the records it no longer finds deleted.

A run first walks the pages from its resume point (a walk cut short resumes at its next page);
if changes disturbed the walk (the totals moved, or it did not list exactly as many records as
reported), a keyset walk from the same resume point repairs it. Every batch is upserted and its
history versioned in one transaction with what it advances: the resume point, or the page
walk's progress and the ids it listed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ductwork.streams.model import Step
from ductwork.sync.context import (
    PendingPages,
    StepResult,
    SyncContext,
    epoch_seconds,
    fetch,
)
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.paging import UpdatedAfterPaging
from ductwork.upstream.schema_drift import DriftTally, RecordShape
from ductwork.upstream.timestamps import canonical_or_received
from ductwork.upstream.updated_after_walk import (
    Key,
    PageWalkProgress,
    WalkReport,
    keyset_walk,
    listing_consistent,
    page_walk,
)
from ductwork.warehouse.columns import Columns, pyarrow_without_pandas
from ductwork.warehouse.loading import Record, RowOf, rows_table, stamped
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.sync_state import (
    PAGE_WALK,
    clear_state,
    read_state,
    resume_from,
    write_state,
)
from warehouse_sql import stream_section

if TYPE_CHECKING:
    import pyarrow as pa

# A page walk commits its pages this many listed records at a time: each transaction pays for
# a history apply and a commit whatever its size (bench/RESULTS.md has the figures).
RECORDS_PER_COMMIT = 10_000


@dataclass(frozen=True)
class HeldPage:
    """A page-walk page held for commit: its fresh records already as rows, each row's key,
    the ids the page listed, and the walk's progress as of that page.

    Rows rather than the parsed records: a record as Python objects takes several times the
    memory of its row in Arrow, and a batch is held while the one before it is stored. A page
    without fresh records builds no table, so a run with nothing new loads no pyarrow.
    """

    rows: pa.Table | None  # None: no fresh record
    keys: list[Key]
    listed: list[str]
    progress: PageWalkProgress


@dataclass(frozen=True)
class UpdatedAfter:
    """The reader of such a stream: its SQL file (sections ``upsert``, ``history_apply``,
    ``walk_ids_add``, ``walk_last``, ``mark_deleted``, ``live``), how its list pages (the
    members of its resume point among them) and how a record becomes a row."""

    sql: str
    paging: UpdatedAfterPaging
    row: RowOf
    columns: Columns
    shape: RecordShape
    options: frozenset[str] = frozenset({"mode", "reset"})
    resumable: bool = True
    guards: frozenset[str] = frozenset({"complete_against_upstream"})

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Upsert new and changed records (and, reconciling, mark vanished ones deleted)."""
        for step in steps:
            yield Walker(self, step.asset, context).result()


class Walker:
    """One run of one such step (tests drive its writes one at a time)."""

    def __init__(self, reader: UpdatedAfter, asset: str, context: SyncContext) -> None:
        self.reader = reader
        self.asset = asset
        self.context = context
        self.con = context.con
        self.paging = reader.paging

    def statement(self, name: str) -> str:
        return stream_section(self.reader.sql, name)

    def result(self) -> StepResult:
        options, con = self.context.options, self.con
        start = resume_from(
            con, self.asset, self.paging.members,
            reset=options.reset, from_scratch=options.reconcile,
        )  # fmt: skip
        drift = DriftTally(self.reader.shape)
        fetched = fetch(
            self.context.upstream,
            lambda client: self.walk(client, start, not options.reconcile, drift),
        )
        report, walk, resumed_after = fetched.value
        deleted = self.mark_deleted(report.ids) if options.reconcile else 0
        live = con.execute(self.statement("live")).fetchall()[0][0]
        resumed_at = report.last or start
        # Only a complete listing reports the stream's total; an incremental walk sees a part.
        total = (
            {"reported_total": next(iter(report.totals))}
            if options.reconcile and len(report.totals) == 1
            else {}
        )
        return StepResult.of(
            self.asset, fetched, live, report.records + deleted,
            rows_upserted=report.records, rows_deleted=deleted, pages=report.pages,
            walk=walk, resumed_after_page=resumed_after, mode=options.mode.value,
            resume_point_updated_at=resumed_at[0] if resumed_at else "",
            resume_point_epoch_s=epoch_seconds(resumed_at[0] if resumed_at else None),
            **total, **drift.as_metadata(),
        )  # fmt: skip

    async def walk(
        self, client: UpstreamClient, start: Key | None, resume: bool, drift: DriftTally
    ) -> tuple[WalkReport, str, int]:
        """Page walk first (resumed at the next page when ``resume`` and an earlier run from
        the same start was cut short); if changes disturbed it, a keyset walk from the same
        start. Every record read is counted in ``drift``. Only a reconciliation (``resume``
        false) keeps every id listed, in the report, to mark deleted the records it lacks.

        Returns the walk's report, which walk finished, and the page the walk resumed after.
        """
        begin = self.unfinished_walk if resume else self.new_page_walk
        progress = await asyncio.to_thread(begin, start)
        resumed_after = progress.pages_done

        async def page_sink(
            records: list[Record], listed: list[str], walked: PageWalkProgress
        ) -> None:
            drift.count(records)
            await held.add(self.hold(records, listed, walked.copy()), len(listed))

        # Pages read before a failure are committed too: a rerun resumes after them.
        async with PendingPages(self.upsert_pages, RECORDS_PER_COMMIT) as held:
            report = await page_walk(client, self.paging, progress, page_sink, keep_ids=not resume)
            if (
                resumed_after == 0
                and not held.committed
                and not report.records
                # Nothing committed: every page the walk listed is still held.
                and listing_consistent(
                    report.totals, len({i for page in held.pages for i in page.listed})
                )
            ):
                # Nothing after the resume point, and this run saw the whole walk: its progress
                # would be written only to be cleared again. A run that writes nothing leaves
                # the warehouse file as the last publish found it (see ``snapshots.publish``).
                held.discard()
                return report, "pages", resumed_after
        if await asyncio.to_thread(self.walk_saw_everything, progress):
            last = await asyncio.to_thread(self.walk_last_key, start)
            await asyncio.to_thread(self.end_page_walk, last)
            report.last = last
            return report, "pages", resumed_after
        await asyncio.to_thread(self.end_page_walk, None)

        async def sink(records: list[Record], resume_at: Key | None) -> None:
            drift.count(records)
            await asyncio.to_thread(self.upsert, records, resume_at)

        repair = await keyset_walk(client, self.paging, start, sink, keep_ids=not resume)
        repair.pages += report.pages
        return repair, "keyset", resumed_after

    def rows(self, records: list[Record]) -> pa.Table:
        """The rows of ``records``, as the upsert statement reads them."""
        return rows_table(records, self.reader.row, self.reader.columns)

    def hold(
        self, records: list[Record], listed: list[str], progress: PageWalkProgress
    ) -> HeldPage:
        """A page-walk page as held for commit: ``records`` (the page's fresh ones) as rows,
        the ids the page ``listed``, and the walk's ``progress`` as of that page."""
        rows = self.rows(records) if records else None
        keys = [self.paging.key_of(record) for record in records]
        return HeldPage(rows, keys, listed, progress)

    def upsert(self, records: list[Record], resume_at: Key | None) -> None:
        """Upsert a batch and version its history, in one transaction with the resume point
        (a keyset walk's). A batch may list a record twice; its latest copy is kept."""
        keys = [self.paging.key_of(record) for record in records]
        batch = [(self.rows(records), keys)] if records else []
        self.write(_latest_rows(batch), resume_at)

    def upsert_pages(self, pages: list[HeldPage]) -> None:
        """Upsert held page-walk pages with the progress of the last and the ids they listed,
        in one transaction. A record on two of the pages is kept in its latest copy."""
        self.write(
            _latest_rows([(page.rows, page.keys) for page in pages if page.rows is not None]),
            None,
            pages[-1].progress,
            [record_id for page in pages for record_id in page.listed],
        )

    def write(
        self,
        rows: pa.Table | None,
        resume_at: Key | None,
        progress: PageWalkProgress | None = None,
        listed: list[str] | None = None,
    ) -> None:
        """Upsert ``rows`` (one per record) and version their history, in one transaction with
        what they advance: the resume point (a keyset walk) or a page walk's progress and the
        ids it ``listed``. Retried under a raised memory limit when DuckDB runs out of memory
        (``ductwork.warehouse.memory_headroom``)."""
        with_memory_headroom(
            self.con,
            lambda: self._write_once(rows, resume_at, progress, listed),
            what=f"{self.asset}: a batch",
        )

    def _write_once(
        self,
        rows: pa.Table | None,
        resume_at: Key | None,
        progress: PageWalkProgress | None,
        listed: list[str] | None,
    ) -> None:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            if rows is not None and rows.num_rows:
                con.register("incoming_rows", stamped(rows))
                try:
                    con.execute(self.statement("upsert"))
                    con.execute(self.statement("history_apply"))
                finally:
                    con.unregister("incoming_rows")
            if resume_at is not None:
                self.write_resume_point(resume_at)
            if progress is not None:
                con.execute(self.statement("walk_ids_add"), [listed or []])
                write_state(con, self.asset + PAGE_WALK, progress.as_json())
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def write_resume_point(self, resume_at: Key) -> None:
        members = self.paging.members
        write_state(self.con, self.asset, dict(zip(members, resume_at, strict=True)))

    def end_page_walk(self, resume_at: Key | None) -> None:
        """Forget a page walk's progress and, when it proved complete, move the resume point to
        its last record, in one transaction."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            if resume_at is not None:
                self.write_resume_point(resume_at)
            clear_state(con, self.asset + PAGE_WALK)
            con.execute(self.statement("walk_ids_clear"))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def new_page_walk(self, start: Key | None) -> PageWalkProgress:
        """A page walk from ``start``, forgetting any unfinished one."""
        self.end_page_walk(None)
        return PageWalkProgress(start)

    def unfinished_walk(self, start: Key | None) -> PageWalkProgress:
        """The committed progress of a page walk from ``start`` that a run did not finish, or
        a new walk when there is none from that start."""
        saved = read_state(self.con, self.asset + PAGE_WALK)
        progress = None if saved is None else PageWalkProgress.from_json(saved)
        if progress is not None and progress.start == start:
            return progress
        return self.new_page_walk(start)

    def walk_last_key(self, start: Key | None) -> Key | None:
        """Where a complete page walk moves the resume point: its newest listed record, if
        later than ``start`` (the walk's pages may have been listed by more than one run)."""
        rows = self.con.execute(self.statement("walk_last")).fetchall()
        if not rows:
            return None
        last = (canonical_or_received(rows[0][0]), str(rows[0][1]))
        return last if start is None or last > start else None

    def walk_saw_everything(self, progress: PageWalkProgress) -> bool:
        """One reported total on every page of the walk (before and after any resumption),
        and exactly that many distinct records listed."""
        if len(progress.totals) > 1:
            return False
        listed = self.con.execute(self.statement("walk_ids_distinct")).fetchall()[0][0]
        return listing_consistent(progress.totals, listed)

    def mark_deleted(self, listed: set[str] | None) -> int:
        """Mark live records a complete listing no longer contains deleted and close their
        current history versions, in one transaction; returns how many."""
        if listed is None:  # a walk that kept no ids would have every record marked
            raise ValueError("a listing that kept no ids cannot tell which records went")
        pa = pyarrow_without_pandas()
        ids = pa.table({"listed_id": pa.array(sorted(listed), pa.string())})
        con = self.con
        con.register("listed_ids", ids)
        con.execute("BEGIN TRANSACTION")
        try:
            rows = con.execute(self.statement("mark_deleted")).fetchall()
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.unregister("listed_ids")
        return rows[0][0] if rows else 0


def _latest_rows(batches: list[tuple[pa.Table, list[Key]]]) -> pa.Table | None:
    """The batches' rows (each with its rows' keys), one per record (None: no batch): a
    record listed more than once (its updatedAt moved while the walk went on) keeps the row of
    its greatest key, the later one on a tie."""
    if not batches:
        return None
    pa = pyarrow_without_pandas()
    newest: dict[str, tuple[Key, int, int]] = {}
    for batch_number, (_, keys) in enumerate(batches):
        for row_number, key in enumerate(keys):
            seen = newest.get(key[1])
            if seen is None or key >= seen[0]:
                newest[key[1]] = (key, batch_number, row_number)
    tables = [rows for rows, _ in batches]
    if len(newest) < sum(table.num_rows for table in tables):
        keep = [[False] * table.num_rows for table in tables]
        for _, batch_number, row_number in newest.values():
            keep[batch_number][row_number] = True
        tables = [table.filter(pa.array(mask)) for table, mask in zip(tables, keep, strict=True)]
    return pa.concat_tables(tables)
