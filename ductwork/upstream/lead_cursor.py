"""Walking the CRM lead list by its (CreatedDate, Id) cursor.

Thousands of leads can share one CreatedDate, so the cursor is always the pair; a walk hands
each page to a sink together with the cursor after it, so the sink can commit both at once
and a crash resumes at the last committed page. The cursor's CreatedDate is always in the
contract's form, whatever form the upstream wrote it in.

The cursor must move forward: a page asked for after a cursor that lists a lead not after it
(an upstream that ignores the cursor, and answers its first page again) would make the walk go
round for ever, so it is refused with ``UpstreamContractError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ductwork.contract.paths import LEADS
from ductwork.upstream.client import UpstreamClient, UpstreamContractError
from ductwork.upstream.timestamps import canonical_or_received

PAGE = 1000
Record = dict[str, Any]
Cursor = tuple[str, str]
Sink = Callable[[list[Record], Cursor], Awaitable[None]]


def cursor_of(lead: Record) -> Cursor:
    """The cursor that points just after this lead, its CreatedDate in the contract's form."""
    return (canonical_or_received(lead.get("CreatedDate")), str(lead["Id"]))


def refuse_leads_not_after(cursor: Cursor, leads: list[Record]) -> None:
    """Raise UpstreamContractError unless every lead of a page asked for after ``cursor`` is
    after it: otherwise the cursor would not move forward."""
    for lead in leads:
        found = cursor_of(lead)
        if found <= cursor:
            raise UpstreamContractError(
                f"GET {LEADS}: refused, the cursor does not move forward: asked for leads after "
                f"({cursor[0]}, {cursor[1]}), the page lists ({found[0]}, {found[1]})"
            )


@dataclass
class CursorWalk:
    """What one walk read."""

    pages: int = 0
    records: int = 0
    last: Cursor | None = None


async def walk_leads(
    client: UpstreamClient,
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
            params: dict[str, str | int] = {"count": PAGE}
            if created_after is not None:
                params["createdAfter"] = created_after
            if walk.last is not None:
                params["cursorCreatedDate"], params["cursorId"] = walk.last
            leads = (await client.get_json(LEADS, params)).get("data") or []
            if walk.last is not None:
                refuse_leads_not_after(walk.last, leads)
            if stop_at is not None:
                leads = [lead for lead in leads if cursor_of(lead) <= stop_at]
            walk.pages += 1
            walk.records += len(leads)
            if storing is not None:
                await storing
                storing = None
            if leads:
                walk.last = cursor_of(leads[-1])
                storing = asyncio.ensure_future(sink(leads, walk.last))
            if len(leads) < PAGE:
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
