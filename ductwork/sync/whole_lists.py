"""Streams read whole on every run: page-numbered lists with no ``updatedAfter``.

Every list of a batch is probed at once (its pages fetched unparsed and digested, when its last
write is still held); a list whose pages all came back as stored is done. Any other is read in
full and parsed, one after another, and written in place of what was stored. Each list is
committed and reported as soon as it is stored, so a failure later in the step loses none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from ductwork.streams.model import Step
from ductwork.sync.context import Fetched, StepResult, SyncContext, fetch, fetch_each
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.list_reader import digest_known_pages, read_whole_list
from ductwork.upstream.schema_drift import RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import (
    Facts,
    ListContent,
    Record,
    Replacement,
    RowOf,
    no_facts,
    replace_rows,
)
from ductwork.warehouse.loading import rows_table as build_rows

if TYPE_CHECKING:
    import pyarrow as pa

# Tables written beside the list's own, from the same records (a record's nested parts).
Beside = Callable[[list[Record]], list[Replacement]]


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
    fetched = fetch(context.upstream, lambda c: read_whole_list(c, reader.path, reader.key))
    whole = fetched.value
    if probe is not None:
        fetched = fetched.after(probe)
    content = ListContent(step.asset, whole.digest, len(whole.records), whole.pages)
    unchanged = stored.held and content == stored.content
    if not unchanged:
        own = Replacement(step.table, reader.rows_table(whole.records))
        beside = reader.beside(whole.records) if reader.beside else []
        replace_rows(con, own, *beside, content=content)
    drift = content.drift(con, reader.shape, whole.records)
    return StepResult.of(
        step.asset, fetched, len(whole.records), 0 if unchanged else len(whole.records),
        unchanged=unchanged, **reader.facts(con), pages=whole.pages,
        reported_total=whole.reported_total, reads=whole.attempts, **drift,
    )  # fmt: skip
