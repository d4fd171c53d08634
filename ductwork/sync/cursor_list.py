"""Streams whose list pages by a (created, id) cursor and has no ``updatedAfter``: new records
are read from the committed cursor on, then a window of recent ones is read again for changes
(a reconciliation reads everything). Records that are new or changed are queued for their
details (``ductwork.sync.detail_queue``).

Pages are committed several at a time, each commit upserting the pages' records, versioning
their history, queueing their details and moving the cursor in one transaction.

Deletions upstream are not announced: a record simply stops being listed. A run whose walks
listed a range of the list completely (every record, from no cursor; or, with the window
re-read, every record created after the window's start) marks the stored records of that range
it did not list deleted, once every walk has ended. A walk that fails raises before that, so a
listing cut short deletes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

import duckdb

from ductwork.contract.encoding import dumps, format_datetime, parse_received_datetime
from ductwork.streams.model import Step
from ductwork.sync.context import PendingPages, StepResult, SyncContext, epoch_seconds, fetch
from ductwork.sync.deletions import forget_gone
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.cursor_walk import Cursor, Sink, walk_cursor
from ductwork.upstream.paging import CursorPaging
from ductwork.upstream.schema_drift import DriftTally, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Record, RowOf, rows_table
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.sync_state import read_state, resume_from, write_state
from warehouse_sql import stream_section

# Records committed per transaction: each commit also versions history and fills the detail
# queue, a fixed cost per commit, while a cut-short run still loses at most one batch of reads.
RECORDS_PER_COMMIT = 10_000
# Listed ids handed to DuckDB per statement: a list parameter is converted whole, as DuckDB
# values far larger than the ids, so a listing of every lead goes in chunks.
LISTED_IDS_PER_STATEMENT = 10_000
# A page held for commit: its records, and the cursor after it (None: a re-read page, which
# moves no cursor).
HeldPage = tuple[list[Record], Cursor | None]


def _holding(drift: DriftTally, held: PendingPages[HeldPage], *, moves_cursor: bool) -> Sink:
    """A walk's sink: count each page's drift and hold it, with its cursor when the walk is
    the one that moves it (a re-read of the window moves none)."""

    async def take(records: list[Record], cursor: Cursor) -> None:
        drift.count(records)
        await held.add((records, cursor if moves_cursor else None), len(records))

    return take


@dataclass
class Listing:
    """What a run's walks listed: the range of the list they read whole, every record created
    after ``created_after`` (None: every record). ``complete`` is False when they read no range
    whole (an incremental run without a window re-read): then nothing may be taken for deleted.
    The ids of the records they read are not held here but in the step's connection, in the
    temporary table ``start_listing`` makes, as each batch is stored: a set of every id held
    in Python grew with the list (the lead list's high-water mark was 50 MiB higher with it at
    half a million leads)."""

    created_after: str | None = None
    complete: bool = False


@dataclass(frozen=True)
class CursorList:
    """The reader of such a list: its SQL file (sections ``stored_with_details``, ``changed``,
    ``differing``, ``upsert``, ``history_apply``, ``listed_create``, ``listed_add``,
    ``listed_drop``, ``unlisted``, ``forget_gone``, ``queue_all``, ``counts``), how its list
    pages (the members of its cursor among them) and its rows."""

    sql: str
    paging: CursorPaging
    row: RowOf
    columns: Columns
    shape: RecordShape
    options: frozenset[str] = frozenset({"mode", "reset", "window_days"})
    resumable: bool = True
    guards: frozenset[str] = frozenset({"cursor_only_moves_forward"})

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Mirror the list of each step."""
        for step in steps:
            yield self._sync_one(step, context)

    def statement(self, name: str) -> str:
        return stream_section(self.sql, name)

    def _sync_one(self, step: Step, context: SyncContext) -> StepResult:
        con, options = context.con, context.options
        start = resume_from(
            con, step.asset, self.paging.members,
            reset=options.reset, from_scratch=options.reconcile,
        )  # fmt: skip
        window = None if options.reconcile else options.window_days
        fetched = fetch(
            context.upstream, lambda client: self._walk(client, step.asset, con, start, window)
        )
        counts, listing = fetched.value
        deleted = self.mark_unlisted_deleted(con, listing) if listing.complete else 0
        if options.reconcile:
            con.execute(self.statement("queue_all"))
        total, queued = con.execute(self.statement("counts")).fetchall()[0]
        cursor = read_state(con, step.asset) or {}
        return StepResult.of(
            step.asset, fetched, total, counts["records_changed"] + deleted,
            **{k: v for k, v in counts.items() if k != "records_changed"},
            rows_deleted=deleted, details_queued=queued, mode=options.mode.value,
            cursor_created_date=cursor.get(self.paging.created_member, ""),
            cursor_id=cursor.get(self.paging.id_member, ""),
            cursor_epoch_s=epoch_seconds(cursor.get(self.paging.created_member)),
        )  # fmt: skip

    async def _walk(
        self,
        client: UpstreamClient,
        asset: str,
        con: duckdb.DuckDBPyConnection,
        start: Cursor | None,
        window_days: int | None,
    ) -> tuple[dict[str, int], Listing]:
        """New records from the committed cursor on; then, re-read the recent window for
        changes. Returns the counts, which include the schema drift of every record read, and
        what the walks listed (both walks having ended: one that fails raises)."""
        drift = DriftTally(self.shape)
        id_member = self.paging.id_member
        changed = [0]
        # From no cursor the walk lists every record; from a cursor, only with the window. The
        # listing is returned only once every walk has ended (one that fails raises).
        listing = Listing(complete=start is None or window_days is not None)
        if listing.complete:  # else no id is wanted: nothing is taken for deleted
            self.start_listing(con)  # no write runs yet: the connection is this thread's

        def store(pages: list[HeldPage]) -> None:
            if listing.complete:
                self.add_listed(con, [str(r[id_member]) for records, _ in pages for r in records])
            changed[0] += self.store_pages(con, asset, pages)

        def pages_held() -> PendingPages[HeldPage]:
            # Pages read before a failure are committed too: a rerun resumes after them.
            return PendingPages(store, RECORDS_PER_COMMIT)

        async with pages_held() as held:
            ahead = await walk_cursor(
                client, self.paging, _holding(drift, held, moves_cursor=True), after=start
            )
        # Named by the records' noun: leads_new_or_resumed, leads_revisited for the leads.
        new, revisited = f"{self.paging.noun}_new_or_resumed", f"{self.paging.noun}_revisited"
        counts = {"pages": ahead.pages, new: ahead.records, revisited: 0}
        if start is not None and window_days is not None:
            since = parse_received_datetime(start[0]) - timedelta(days=window_days)
            async with pages_held() as held:
                window = await walk_cursor(
                    client,
                    self.paging,
                    _holding(drift, held, moves_cursor=False),
                    created_after=format_datetime(since),
                    stop_at=start,
                )
            counts["pages"] += window.pages
            counts[revisited] = window.records
            # The window (since, start] and the walk after start: every record created after
            # the window's start.
            listing.created_after = format_datetime(since)
        return {**counts, "records_changed": changed[0], **drift.as_metadata()}, listing

    def mark_unlisted_deleted(self, con: duckdb.DuckDBPyConnection, listing: Listing) -> int:
        """Take the stored records of a complete listing's range that it did not list for
        deleted upstream (``forget_gone``, in one transaction); returns how many. A listing that
        missed none writes nothing, so a run with nothing new still leaves the warehouse file
        as it found it. The listing's ids are those ``add_listed`` put in the table
        ``start_listing`` made, which is dropped here."""
        try:
            gone = con.execute(
                self.statement("unlisted"), {"created_after": listing.created_after}
            ).fetchall()
        finally:
            con.execute(self.statement("listed_drop"))
        if not gone:
            return 0
        con.execute("BEGIN TRANSACTION")
        try:
            forget_gone(con, self.statement("forget_gone"), [row[0] for row in gone])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return len(gone)

    def start_listing(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the listing's temporary table of ids empty (``unlisted`` reads it)."""
        con.execute(self.statement("listed_create"))

    def add_listed(self, con: duckdb.DuckDBPyConnection, ids: list[str]) -> None:
        """Add ids the walks read to the listing's table, a chunk at a time (an id read twice
        may be there twice: ``unlisted`` asks only whether it is)."""
        for start in range(0, len(ids), LISTED_IDS_PER_STATEMENT):
            chunk = ids[start : start + LISTED_IDS_PER_STATEMENT]
            con.execute(self.statement("listed_add"), [chunk])

    def store_pages(self, con: duckdb.DuckDBPyConnection, asset: str, pages: list[HeldPage]) -> int:
        """``store`` for held pages, with the cursor after the last, in one transaction. A
        record listed on two of them (its created date moved while the walk went on) is stored
        as last read: one statement cannot upsert a key twice."""
        id_member = self.paging.id_member
        latest = {str(record[id_member]): record for records, _ in pages for record in records}
        return with_memory_headroom(
            con,
            lambda: self.store(con, asset, list(latest.values()), pages[-1][1]),
            what=f"{asset}: a batch",
        )

    def stored_as_read(self, con: duckdb.DuckDBPyConnection, records: list[Record]) -> bool:
        """Whether every record (one per id) is stored exactly as read and has its details:
        storing them would then change nothing.

        Asked of re-read pages before they are stored, since in a run with nothing new they
        all are. It builds no Arrow table: the first one a process builds imports pandas, a
        cost a no-change run need not pay.
        """
        id_member = self.paging.id_member
        ids = [str(record[id_member]) for record in records]
        stored = dict(con.execute(self.statement("stored_with_details"), [ids]).fetchall())
        return len(stored) == len(records) and all(
            stored.get(str(record[id_member])) == dumps(record).decode() for record in records
        )

    def store(
        self,
        con: duckdb.DuckDBPyConnection,
        asset: str,
        records: list[Record],
        cursor: Cursor | None,
    ) -> int:
        """Queue changed records' details, upsert the page, version its history and move the
        cursor, in one transaction; returns how many records were new or changed. Re-read
        records (no cursor) stored exactly as read are left alone."""
        if cursor is None and self.stored_as_read(con, records):
            return 0
        import pyarrow.compute as pc

        table = rows_table(records, self.row, self.columns)
        differing_rows = 0
        con.execute("BEGIN TRANSACTION")
        try:
            con.register("incoming_rows", table)
            created = pc.min_max(table["created_at"])
            bounds = {"lo": created["min"].as_py(), "hi": created["max"].as_py()}
            con.execute(self.statement("changed"), bounds)
            differing = con.sql(self.statement("differing"), params=bounds).to_arrow_table()
            con.unregister("incoming_rows")
            differing_rows = differing.num_rows
            if differing_rows:
                con.register("incoming_rows", differing)
                con.execute(self.statement("upsert"))
                con.execute(self.statement("history_apply"))
            if cursor is not None:
                write_state(con, asset, dict(zip(self.paging.members, cursor, strict=True)))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.unregister("incoming_rows")
        return differing_rows
