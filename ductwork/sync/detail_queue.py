"""Details fetched one record at a time, for the ids another step queued (new or changed
records of a list): the queue is drained in batches, each committed with its removals from the
queue, so a cut-short run loses at most one batch of fetches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

from ductwork.contract.encoding import dumps, quote_sku
from ductwork.streams.model import Step
from ductwork.sync.context import StepResult, SyncContext, fetch, fetch_and_store
from ductwork.sync.deletions import forget_gone
from ductwork.upstream.bounded_map import map_bounded
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.schema_drift import DriftTally, RecordShape
from ductwork.warehouse.columns import Columns, pyarrow_without_pandas
from ductwork.warehouse.loading import Record, stamped
from ductwork.warehouse.memory_headroom import with_memory_headroom
from warehouse_sql import stream_section

if TYPE_CHECKING:
    import pyarrow as pa

# Details committed per transaction: each commit also versions history and trims the queue, a
# fixed cost per commit, so larger batches cost far less per record.
BATCH = 10_000
# Details fetched, then turned into rows, at a time: a batch is held as rows while the one
# before it is stored, not as parsed records, which take several times the memory.
CHUNK = 1_000
# A detail as fetched: the id it was requested by, and the answer (None: a 404).
FetchedDetail = tuple[str, Record | None]
# Typed columns of a detail, keyed by the id it was requested by.
DetailRow = Callable[[str, Record], dict[str, Any]]
NOT_FOUND_COLUMNS = Columns(("id", "string"), ("found", "bool"), ("synced_at", "timestamp"))
ID_COLUMNS = Columns(("id", "string"))


@dataclass(frozen=True)
class DetailRows:
    """Fetched details as the store writes them: the rows of those found (their sync time
    still unset), the ids answered 404, and every id asked, in order."""

    found: pa.Table
    missing: list[str]
    asked: list[str]

    @classmethod
    def joined(cls, parts: list[DetailRows]) -> DetailRows:
        """The parts as one."""
        pa = pyarrow_without_pandas()
        return cls(
            pa.concat_tables([part.found for part in parts]),
            [record_id for part in parts for record_id in part.missing],
            [record_id for part in parts for record_id in part.asked],
        )


@dataclass(frozen=True)
class DetailQueue:
    """The reader of such details: the path of one record (``{path}/{id}``), the stream's SQL
    file (sections ``queued``, ``forget_gone``, ``details_upsert``, ``history_apply``,
    ``dequeue``, ``detail_counts``) and how a detail becomes a row.

    A 404 on a detail means the record was deleted upstream: it leaves the list as well
    (``forget_gone``), and its detail is kept as not found.

    ``workers_per_slot``: workers fetching details per request the client keeps in flight.
    Spare workers would keep every slot busy while one waits out a retry's back-off, but each
    freed slot then wakes a waiting worker, which costs the client CPU per detail; a healthy
    upstream makes no worker back off, and a struggling one is better asked less.
    """

    path: str
    sql: str
    row: DetailRow
    columns: Columns
    shape: RecordShape
    workers_per_slot: int = 1
    options: frozenset[str] = frozenset()
    resumable: bool = False
    guards: frozenset[str] = frozenset()

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Drain the detail queue of each step."""
        for step in steps:
            yield self._sync_one(step, context)

    def statement(self, name: str) -> str:
        return stream_section(self.sql, name)

    def queued(self, con: duckdb.DuckDBPyConnection) -> pa.ChunkedArray | list[str]:
        """The ids in the queue, in the order they were queued: the order in which their
        records' history versions were written, so each batch completes versions lying side by
        side (drained in id order, every batch touched every part of the history and each
        checkpoint wrote all of it back: the step grew with the square of the records).

        One Arrow column, held for the whole step: as Python strings in a list, the ids of a
        first sync took several times the memory. An empty queue is an empty list, so a run
        with nothing new does not load pyarrow."""
        queued = con.sql(self.statement("queued"))

        def read() -> pa.ChunkedArray | list[str]:
            if not queued.limit(1).fetchall():
                return []
            pyarrow_without_pandas()
            return queued.to_arrow_table().column(0)

        # A large queue may need more than the sync's DuckDB limit, as a batch may.
        return with_memory_headroom(con, read, what="reading the detail queue")

    def _sync_one(self, step: Step, context: SyncContext) -> StepResult:
        con = context.con
        queued = self.queued(con)
        context.info("fetching details of %d leads", len(queued))
        drift = DriftTally(self.shape)

        async def drain(client: UpstreamClient) -> int:
            await fetch_and_store(
                _batches(queued, BATCH),
                lambda ids: self.fetch_rows(client, ids, drift),
                lambda rows: with_memory_headroom(
                    con, lambda: self.write(con, rows), what=f"{step.asset}: a batch"
                ),
            )
            return len(queued)

        fetched = fetch(context.upstream, drain)
        total, missing = con.execute(self.statement("detail_counts")).fetchall()[0]
        return StepResult.of(
            step.asset, fetched, total, fetched.value,
            details_fetched=fetched.value, not_found=missing, **drift.as_metadata(),
        )  # fmt: skip

    async def fetch(self, client: UpstreamClient, ids: list[str]) -> list[FetchedDetail]:
        """Fetch details concurrently (the client bounds requests in flight), each paired with
        the id it was requested by."""

        async def one(record_id: str) -> FetchedDetail:
            answer = await client.get(
                f"{self.path}/{quote_sku(record_id)}",
                accept=frozenset({200, 404}),
                parse_json=True,
            )
            return (record_id, None if answer.status == 404 else answer.json())

        return await map_bounded(one, ids, self.workers_per_slot * client.concurrency)

    async def fetch_rows(
        self, client: UpstreamClient, ids: list[str], drift: DriftTally
    ) -> DetailRows:
        """Fetch details ``CHUNK`` at a time, each chunk turned into rows (its drift counted)
        as soon as it is complete."""
        parts = []
        for start in range(0, len(ids), CHUNK):
            parts.append(self.rows(await self.fetch(client, ids[start : start + CHUNK]), drift))
        return DetailRows.joined(parts)

    def rows(self, details: list[FetchedDetail], drift: DriftTally) -> DetailRows:
        """The rows of fetched details, counting the drift of those found."""
        found = [(record_id, detail) for record_id, detail in details if detail is not None]
        drift.count([detail for _, detail in found])
        table = self.columns.table(
            [
                {**self.row(record_id, detail), "record": dumps(detail).decode()}
                for record_id, detail in found
            ]
        )
        missing = [record_id for record_id, detail in details if detail is None]
        return DetailRows(table, missing, [record_id for record_id, _ in details])

    def write(self, con: duckdb.DuckDBPyConnection, rows: DetailRows) -> None:
        """Upsert the rows of fetched details, version their history and take their ids off
        the queue, in one transaction; every row is stamped with this moment. The records
        answered 404 are forgotten first (their history closes and they leave the list), so
        no version opens for them."""
        now = datetime.now(UTC)
        found = stamped(rows.found, now)
        placeholders = NOT_FOUND_COLUMNS.table(
            [{"id": i, "found": False, "synced_at": now} for i in rows.missing]
        )
        con.execute("BEGIN TRANSACTION")
        try:
            if rows.missing:
                forget_gone(con, self.statement("forget_gone"), rows.missing)
            for batch in (found, placeholders):
                if batch.num_rows:
                    con.register("incoming_rows", batch)
                    con.execute(self.statement("details_upsert"))
                    con.unregister("incoming_rows")
            ids = ID_COLUMNS.table([{"id": record_id} for record_id in rows.asked])
            con.register("incoming_rows", ids)
            con.execute(self.statement("history_apply"))
            con.execute(self.statement("dequeue"))
            con.unregister("incoming_rows")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _batches(ids: pa.ChunkedArray | list[str], size: int) -> Iterator[list[str]]:
    """The ids ``size`` at a time, each batch as Python strings only when it is reached."""
    for start in range(0, len(ids), size):
        batch = ids[start : start + size]
        yield batch if isinstance(batch, list) else batch.to_pylist()
