"""Streams fetched one request at a time, the requests derived from other streams' tables.

The stream's ``requests`` statement lists every request the mirror holds (a key, its query
parameters, and a signature that changes when what it derives from changes); a run fetches the
requests that are new or whose signature changed (all of them in a reconciliation), and deletes
the rows of requests no longer derived. When none of the lists the requests derive from changed
since a pass fetched every request, and the table holds as many rows as that pass left, there
is nothing to derive or fetch.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from ductwork.contract.encoding import dumps
from ductwork.streams.model import Step
from ductwork.sync.context import Fetched, StepResult, SyncContext, fetch, fetch_and_store
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.schema_drift import DriftTally, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Record
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.sync_state import CONTENT, DERIVED, read_state, write_state
from warehouse_sql import stream_section

BATCH = 500
# A derived request: its key, its query parameters' values (None: left out), its signature.
Request = tuple[Any, ...]
# Typed columns of a found record.
FoundRow = Callable[[Record], dict[str, Any]]


@dataclass(frozen=True)
class DerivedRequests:
    """The reader of such a stream: the path asked, its query parameters (the ``requests``
    statement's columns after the key, before the signature), the stream's SQL file (sections
    ``requests``, ``upsert``, ``keys``, ``delete_others``, ``counts``) and its rows."""

    path: str
    params: tuple[str, ...]
    sql: str
    found_row: FoundRow
    columns: Columns
    shape: RecordShape
    options: frozenset[str] = frozenset({"mode"})
    resumable: bool = False
    guards: frozenset[str] = frozenset()

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Mirror the derived requests of each step."""
        for step in steps:
            yield self._sync_one(step, context)

    def statement(self, name: str) -> str:
        return stream_section(self.sql, name)

    def _sync_one(self, step: Step, context: SyncContext) -> StepResult:
        drift = DriftTally(self.shape)
        con, reconcile = context.con, context.options.reconcile
        sources = self._sources(con, step.after)
        last = read_state(con, step.asset + DERIVED)
        total, found = con.execute(self.statement("counts")).fetchall()[0]
        if (
            not reconcile
            and last is not None
            and (last["sources"], last["rows"])
            == (
                sources,
                total,
            )
        ):
            done = _Pass(Fetched.nothing(None), last["requests"], 0, 0)
        else:
            done = self._pass(context, drift)
            total, found = con.execute(self.statement("counts")).fetchall()[0]
            derived = {"sources": sources, "rows": total, "requests": done.derived}
            write_state(con, step.asset + DERIVED, derived)
        return StepResult.of(
            step.asset, done.fetched, found, done.requested + done.deleted,
            requests_derived=done.derived, requests_fetched=done.requested,
            not_found=total - found, rows_deleted=done.deleted,
            mode=context.options.mode.value, **drift.as_metadata(),
        )  # fmt: skip

    def derived(self, con: duckdb.DuckDBPyConnection) -> list[Request]:
        """Every request the stored tables imply (section ``requests``). Read whole, they may
        need more than the sync's DuckDB limit, as a batch may: then read again under a raised
        limit."""
        return with_memory_headroom(
            con,
            lambda: con.execute(self.statement("requests")).fetchall(),
            what="deriving the requests",
        )

    def _pass(self, context: SyncContext, drift: DriftTally) -> _Pass:
        """Derive the requests, fetch those not stored as derived, delete those no longer
        derived."""
        con = context.con
        wanted = self.derived(con)
        have = dict(con.execute(self.statement("keys")).fetchall())
        reconcile = context.options.reconcile
        todo = [row for row in wanted if reconcile or have.get(row[0]) != row[-1]]

        async def run(client: UpstreamClient) -> None:
            await fetch_and_store(
                [todo[i : i + BATCH] for i in range(0, len(todo), BATCH)],
                lambda requests: self._fetch(client, requests, drift),
                lambda rows: self._store(con, rows),
            )

        fetched = fetch(context.upstream, run)
        removed = con.execute(self.statement("delete_others"), [[row[0] for row in wanted]])
        return _Pass(fetched, len(wanted), len(todo), removed.fetchall()[0][0])

    async def _fetch(
        self, client: UpstreamClient, requests: list[Request], drift: DriftTally
    ) -> list[dict[str, Any]]:
        """Fetch one batch concurrently; a 404 becomes a row with found = false. Every record
        found is counted in ``drift``."""

        async def one(request: Request) -> dict[str, Any]:
            key, *values, signature = request
            query = {name: v for name, v in zip(self.params, values, strict=True) if v}
            answer = await client.get(
                self.path, query, accept=frozenset({200, 404}), parse_json=True
            )
            data = answer.json().get("data") if answer.status == 200 else None
            found = isinstance(data, dict) and answer.status == 200
            if found:
                drift.count([data])
            typed = self.found_row(data) if found else {}
            return {
                "request_key": key,
                **dict(zip(self.params, values, strict=True)),
                "found": found,
                **{name: typed.get(name) for name in self._typed_names()},
                "source_signature": signature,
                "record": dumps(data).decode() if found else None,
                "synced_at": datetime.now(UTC),
            }

        return list(await asyncio.gather(*(one(request) for request in requests)))

    def _typed_names(self) -> list[str]:
        fixed = {"request_key", "found", "source_signature", "record", "synced_at", *self.params}
        return [name for name in self.columns.names if name not in fixed]

    def _store(self, con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
        con.register("incoming_rows", self.columns.table(rows))
        try:
            con.execute(self.statement("upsert"))
        finally:
            con.unregister("incoming_rows")

    def _sources(self, con: duckdb.DuckDBPyConnection, lists: tuple[str, ...]) -> str:
        """A digest of what the requests derive from: the stored content of the lists they
        read, and the statement that derives them."""
        contents = [read_state(con, asset + CONTENT) for asset in sorted(lists)]
        text = "\n".join([self.statement("requests"), *(dumps(c).decode() for c in contents)])
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class _Pass:
    """What one pass over the derived requests did."""

    fetched: Fetched[None]
    derived: int  # requests the other streams imply
    requested: int  # of them, fetched (new, changed, or all in a reconciliation)
    deleted: int  # rows whose request is no longer derived
