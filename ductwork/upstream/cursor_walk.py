"""Walking a list paged by a (created, id) cursor, as its ``CursorPaging`` declares.

Thousands of records can share one created date-time, so the cursor is always the pair; a walk
hands each page to a sink together with the cursor after it, so the sink can commit both at
once and a crash resumes at the last committed page. The cursor's date-time is always in the
contract's form, whatever form the upstream wrote it in.

The cursor must move forward: a page asked for after a cursor that lists a record not after it
(an upstream that ignores the cursor, and answers its first page again) would make the walk go
round for ever, so it is refused with ``UpstreamContractError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ductwork.upstream.client import UpstreamClient, UpstreamContractError
from ductwork.upstream.paging import CursorPaging, Position, Record

Cursor = Position
Sink = Callable[[list[Record], Cursor], Awaitable[None]]


def refuse_records_not_after(paging: CursorPaging, cursor: Cursor, records: list[Record]) -> None:
    """Raise UpstreamContractError unless every record of a page asked for after ``cursor`` is
    after it: otherwise the cursor would not move forward."""
    for record in records:
        found = paging.cursor_of(record)
        if found <= cursor:
            raise UpstreamContractError(
                f"GET {paging.path}: refused, the cursor does not move forward: asked for "
                f"{paging.noun} after ({cursor[0]}, {cursor[1]}), the page lists "
                f"({found[0]}, {found[1]})"
            )


@dataclass
class CursorWalk:
    """What one walk read."""

    pages: int = 0
    records: int = 0
    last: Cursor | None = None


async def walk_cursor(
    client: UpstreamClient,
    paging: CursorPaging,
    sink: Sink,
    *,
    after: Cursor | None = None,
    created_after: str | None = None,
    stop_at: Cursor | None = None,
) -> CursorWalk:
    """Page from ``after`` (or ``created_after``) to the end, or until passing ``stop_at``.

    The next page is fetched while the sink stores the current one; pages reach the sink one
    at a time, in order, and the walk returns only once the sink has taken the last.
    """
    walk = CursorWalk(last=after)
    storing: asyncio.Future[None] | None = None
    try:
        while True:
            query = paging.parameters(walk.last, created_after)
            records = (await client.get_json(paging.path, query)).get("data") or []
            if walk.last is not None:
                refuse_records_not_after(paging, walk.last, records)
            if stop_at is not None:
                records = [record for record in records if paging.cursor_of(record) <= stop_at]
            walk.pages += 1
            walk.records += len(records)
            if storing is not None:
                await storing
                storing = None
            if records:
                walk.last = paging.cursor_of(records[-1])
                storing = asyncio.ensure_future(sink(records, walk.last))
            if len(records) < paging.page_size:
                if storing is not None:
                    await storing
                return walk
    except BaseException:
        # A failed fetch must not abandon a page being stored: let its commit finish first.
        if storing is not None:
            await asyncio.wait([storing])
            if not storing.cancelled():
                storing.exception()  # retrieved: the error raised here is the first one
        raise
