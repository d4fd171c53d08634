"""Streams answered in one request: the whole answer is read on every run, and written only
when its bytes differ from the answer last stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from ductwork.streams.model import Step, Table
from ductwork.sync.context import StepResult, SyncContext, fetch
from ductwork.upstream.list_reader import bodies_digest
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
    rows_table,
)

# The records of an answer, and why its records could not be read (None: they could).
Parse = Callable[[Any], tuple[list[Record], str | None]]
# The replacements that store an answer: its raw body, its records, why they could not be read.
Write = Callable[[bytes, list[Record], str | None], list[Replacement]]
# An answer without the records ``ductwork forget --suppress`` keeps out: its body and records.
Suppress = Callable[[duckdb.DuckDBPyConnection, bytes, list[Record]], tuple[bytes, list[Record]]]


def one_row_each(table: Table, columns: Columns, row: RowOf) -> Write:
    """How most such answers are stored: one row of ``columns`` per record in ``table``, in
    place of the rows stored before. Each row also gets ``ordinal``, the record's position in
    the answer (from 0), so that the stream's ``served`` statement can answer in the
    upstream's order."""

    def write(body: bytes, records: list[Record], problem: str | None) -> list[Replacement]:
        positions = iter(range(len(records)))
        numbered = rows_table(records, lambda r: {**row(r), "ordinal": next(positions)}, columns)
        return [Replacement(table, numbered)]

    return write


def data_list(document: Any) -> tuple[list[Record], str | None]:
    """The objects of an answer's ``data`` list (the common shape of such answers)."""
    data = document.get("data") if isinstance(document, dict) else None
    return [item for item in data or [] if isinstance(item, dict)], None


@dataclass(frozen=True)
class Document:
    """The reader of such a stream: the path asked (with the key or not), how its records
    are read from the answer and how the answer is stored."""

    path: str
    write: Write
    shape: RecordShape
    parse: Parse = data_list
    auth: bool = True
    facts: Facts = no_facts
    options: frozenset[str] = frozenset()
    resumable: bool = False
    guards: frozenset[str] = frozenset()
    suppress: Suppress | None = None  # a stream with personal data: its suppressed records

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Mirror the answer of each step."""
        for step in steps:
            yield self._sync_one(step, context)

    def _sync_one(self, step: Step, context: SyncContext) -> StepResult:
        fetched = fetch(
            context.upstream, lambda client: client.get(self.path, auth=self.auth, parse_json=True)
        )
        body = fetched.value.body
        records, problem = self.parse(fetched.value.json())
        if self.suppress is not None:
            # Before the digest: lifting a suppression then changes what is stored.
            body, records = self.suppress(context.con, body, records)
        content = ListContent(step.asset, bodies_digest(body), len(records))
        unchanged = content.already_stored(context.con, step.table)
        if not unchanged:
            replace_rows(context.con, *self.write(body, records, problem), content=content)
        drift = content.drift(context.con, lambda: self.shape.drift(records))
        return StepResult.of(
            step.asset, fetched, len(records), 0 if unchanged else len(records),
            unchanged=unchanged, parse_error=problem or "", **self.facts(context.con), **drift,
        )  # fmt: skip
