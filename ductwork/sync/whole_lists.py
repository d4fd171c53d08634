"""Streams read whole on every run: page-numbered lists with no ``updatedAfter``.

Every list of a batch is probed at once (its pages fetched unparsed and digested, when its last
write is still held); a list whose pages all came back as stored is done. Any other is read in
full and parsed, one after another, and written in place of what was stored. Each list is
committed and reported as soon as it is stored, so a failure later in the step loses none.

A list is read page by page into Arrow batches: each page's records become rows (and a drift
verdict each) as the page arrives, and are dropped then, so a read holds the list as Arrow
rows and its keys, never as parsed records. What is written beside a list is made from its
rows' JSON, a page's worth at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from ductwork.contract.encoding import loads
from ductwork.streams.model import Step
from ductwork.sync.context import Fetched, StepResult, SyncContext, fetch, fetch_each
from ductwork.upstream.client import LIST_PAGE_SIZE, UpstreamClient
from ductwork.upstream.list_reader import BatchedListRead, digest_known_pages, read_list_batches
from ductwork.upstream.schema_drift import DriftTally, RecordShape, Verdict
from ductwork.warehouse.columns import Columns, pyarrow_without_pandas
from ductwork.warehouse.loading import (
    Facts,
    ListContent,
    Record,
    Replacement,
    RowOf,
    no_facts,
    replace_rows,
    stamped,
)
from ductwork.warehouse.loading import rows_table as build_rows

if TYPE_CHECKING:
    import pyarrow as pa

# Tables written beside the list's own, from the same records (a record's nested parts).
Beside = Callable[[list[Record]], list[Replacement]]


@dataclass(frozen=True)
class _Page:
    """One page of a list as read: its rows, and each record's drift verdict."""

    rows: pa.Table
    verdicts: list[Verdict]


@dataclass(frozen=True)
class WholeList:
    """A page-numbered list read whole: its path, the member that keys its records, how a
    record becomes a row, and what else is written beside it."""

    path: str
    key: Callable[[Record], Hashable]
    row: RowOf
    columns: Columns
    shape: RecordShape
    beside: Beside | None = None
    facts: Facts = no_facts
    options: frozenset[str] = frozenset()
    resumable: bool = False
    guards: frozenset[str] = frozenset()

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Mirror the lists of ``steps`` (each a ``WholeList``) in one pass."""
        con = context.con
        stored = {step.asset: _Stored.of(con, step) for step in steps}
        probes = fetch_each(
            context.upstream,
            {
                step.asset: _probe(_reader(step), stored[step.asset])
                for step in steps
                if stored[step.asset].pages_to_probe
            },
        )
        for step in steps:
            yield _mirror(context, step, stored[step.asset], probes.get(step.asset))

    def rows_table(self, records: list[Record]) -> pa.Table:
        """The list's rows, each with its record's JSON and sync time."""
        return build_rows(records, self.row, self.columns)

    async def read(self, client: UpstreamClient, drift: DriftTally) -> BatchedListRead[_Page]:
        """A consistent read of the list, a batch of rows per page (``drift`` judges each
        record as its page arrives; nothing is counted yet)."""

        def page(records: list[Record]) -> _Page:
            return _Page(self.rows_table(records), [drift.verdict(r) for r in records])

        return await read_list_batches(client, self.path, self.key, page)

    def beside_rows(self, rows: pa.Table) -> list[Replacement]:
        """What is written beside the list, made from its rows' records a page at a time."""
        assert self.beside is not None
        parts = [
            self.beside([loads(text) for text in chunk.column("record").to_pylist()])
            for chunk in rows.to_batches(LIST_PAGE_SIZE)
        ] or [self.beside([])]
        pa = pyarrow_without_pandas()
        return [
            Replacement(first.table, pa.concat_tables([part[at].rows for part in parts]))
            for at, first in enumerate(parts[0])
        ]


def _reader(step: Step) -> WholeList:
    reader = step.reader
    if not isinstance(reader, WholeList):
        raise TypeError(f"{step.asset} is not a whole list")
    return reader


@dataclass(frozen=True)
class _Stored:
    """What the warehouse holds of one list, as the last write of it left it."""

    content: ListContent | None
    held: bool  # the list's rows are still there, as many as that write stored
    drift: dict[str, int] | None  # the schema-drift counts recorded for that very content

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, step: Step) -> _Stored:
        """The list's stored state, read from the warehouse."""
        content = ListContent.last_stored(con, step.asset)
        held = content is not None and content.still_held(con, step.table)
        drift = content.recorded_drift(con) if content is not None and held else None
        return cls(content, held, drift)

    @property
    def pages_to_probe(self) -> int:
        """How many pages a probe must compare (0: read the list in full instead)."""
        return self.content.pages if self.content is not None and self.drift is not None else 0


def _probe(reader: WholeList, stored: _Stored) -> Callable[[UpstreamClient], Awaitable[str | None]]:
    return lambda client: digest_known_pages(client, reader.path, stored.pages_to_probe)


def _mirror(
    context: SyncContext, step: Step, stored: _Stored, probe: Fetched[str | None] | None
) -> StepResult:
    """Store one list unless unchanged, and report what it cost.

    ``probe`` is the digest of the list's pages fetched unparsed, when its last write is still
    held. A list whose pages all came back as stored is done; any other is read in full and
    parsed, which fetches it a second time.
    """
    reader, con = _reader(step), context.con
    if probe is not None and stored.content is not None and probe.value == stored.content.digest:
        rows = stored.content.rows  # a consistent read found as many records as reported
        return StepResult.of(
            step.asset, probe, rows, 0, unchanged=True, **reader.facts(con),
            pages=stored.content.pages, reported_total=rows, reads=0, **(stored.drift or {}),
        )  # fmt: skip
    drift = DriftTally(reader.shape)
    fetched = fetch(context.upstream, lambda client: reader.read(client, drift))
    whole = fetched.value
    if probe is not None:
        fetched = fetched.after(probe)
    content = ListContent(step.asset, whole.digest, whole.records, whole.pages)
    unchanged = stored.held and content == stored.content
    if not unchanged:
        rows = _list_rows(reader, whole)
        own = Replacement(step.table, rows)
        beside = reader.beside_rows(rows) if reader.beside else []
        replace_rows(con, own, *beside, content=content)
        del rows, own, beside  # freed before the drift counts and facts are read
    counts = content.drift(con, lambda: _drift_counts(drift, whole))
    return StepResult.of(
        step.asset, fetched, whole.records, 0 if unchanged else whole.records,
        unchanged=unchanged, **reader.facts(con), pages=whole.pages,
        reported_total=whole.reported_total, reads=whole.attempts, **counts,
    )  # fmt: skip


def _list_rows(reader: WholeList, whole: BatchedListRead[_Page]) -> pa.Table:
    """The list's rows, one per key, all stamped with the time they are stored."""
    pa = pyarrow_without_pandas()
    rows = pa.concat_tables([page.rows for page in whole.batches])
    if whole.kept is not None:
        rows = rows.take(whole.kept)
    return stamped(rows) if "synced_at" in reader.columns.names else rows


def _drift_counts(drift: DriftTally, whole: BatchedListRead[_Page]) -> dict[str, int]:
    """The drift counts of the list's records, one per key."""
    verdicts = [verdict for page in whole.batches for verdict in page.verdicts]
    drift.add(verdicts if whole.kept is None else [verdicts[at] for at in whole.kept])
    return drift.as_metadata()
