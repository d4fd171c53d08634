"""Walking a list paged by page number from an ``updatedAfter`` on, ordered by (updated
date-time, id), as its ``UpdatedAfterPaging`` declares (the warehouse's digital assets).

Two ways, one result: every record whose bookmark is later than the start.
- ``page_walk`` fetches pages concurrently (fast). Records that change while it pages shift
  the positions under page/count, so it reports whether the walk was self-consistent: one total
  on every page and exactly that many distinct ids. Its progress (pages done, totals seen) is
  committed with the pages' rows, so a walk cut short resumes after the last committed page.
- ``keyset_walk`` moves ``updatedAfter`` along the last bookmark seen, one page at a time. A
  changed record only moves later, where the walk still meets it, so positions cannot shift
  under it; it is the fallback when the page walk was disturbed.

Both keep the rules of ``list_pages`` (no page repeated, no total that contradicts the pages)
and raise ``UpstreamContractError`` rather than walk on where the upstream would never let
them end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ductwork.contract.encoding import format_datetime, parse_received_datetime
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.list_pages import PageRules, records_of, total_of
from ductwork.upstream.paging import Position, Record, UpdatedAfterPaging
from ductwork.upstream.timestamps import canonical_or_received

Key = Position
Sink = Callable[[list[Record], Key | None], Awaitable[None]]


def just_before(updated_at: str) -> str:
    """An ``updatedAfter`` that still includes records updated exactly at ``updated_at``."""
    return format_datetime(parse_received_datetime(updated_at) - timedelta(milliseconds=1))


@dataclass
class WalkReport:
    """What a walk of ``paging``'s list saw.

    ``ids``: the distinct ids listed, kept only for a caller that needs them all (a
    reconciliation marks deleted the records its listing lacks); ``None`` otherwise. Kept by
    every walk, they grew a sync's memory with the list: a set of a million asset ids holds 87 MiB.
    """

    paging: UpdatedAfterPaging
    pages: int = 0
    records: int = 0
    ids: set[str] | None = field(default_factory=set)
    totals: set[int] = field(default_factory=set)
    last: Key | None = None

    @property
    def consistent(self) -> bool:
        """One reported total on every page, and exactly that many distinct records (known
        only where the ids were kept)."""
        if self.ids is None:
            raise ValueError("this walk did not keep the ids it listed")
        return listing_consistent(self.totals, len(self.ids))

    def saw(self, records: list[Record]) -> None:
        self.pages += 1
        self.records += len(records)
        for record in records:
            if self.ids is not None:
                self.ids.add(self.paging.id_of(record))
            key = self.paging.key_of(record)
            if self.last is None or key > self.last:
                self.last = key


def listing_consistent(totals: set[int], distinct_ids: int) -> bool:
    """Whether a listing is self-consistent: one total reported on every page, and exactly
    that many distinct ids listed."""
    return len(totals) <= 1 and distinct_ids == next(iter(totals), 0)


@dataclass
class PageWalkProgress:
    """How far a page walk from ``start`` got: committed with each page's rows."""

    start: Key | None
    pages_done: int = 0
    totals: set[int] = field(default_factory=set)

    @property
    def resumed(self) -> bool:
        """Whether earlier pages of this walk were committed by a run that did not finish."""
        return self.pages_done > 0

    def as_json(self) -> dict[str, Any]:
        """The form kept in ``sync_state``."""
        start = None if self.start is None else list(self.start)
        return {"start": start, "pagesDone": self.pages_done, "totals": sorted(self.totals)}

    def copy(self) -> PageWalkProgress:
        """This progress as it stands, unaffected by pages the walk reads later."""
        return PageWalkProgress(self.start, self.pages_done, set(self.totals))

    @classmethod
    def from_json(cls, saved: dict[str, Any]) -> PageWalkProgress:
        """Read back what ``as_json`` wrote."""
        start = saved.get("start")
        return cls(
            start=None if start is None else (canonical_or_received(start[0]), str(start[1])),
            pages_done=int(saved.get("pagesDone", 0)),
            totals={int(total) for total in saved.get("totals", [])},
        )


# A page walk's sink: the page's fresh records, every id the page listed, the walk's progress.
PageSink = Callable[[list[Record], list[str], PageWalkProgress], Awaitable[None]]


def _after_param(paging: UpdatedAfterPaging, start: Key | None) -> dict[str, str]:
    if start is None or not start[0]:
        return {}
    return {paging.updated_after_parameter: just_before(start[0])}


async def page_walk(
    client: UpstreamClient,
    paging: UpdatedAfterPaging,
    progress: PageWalkProgress,
    sink: PageSink,
    *,
    keep_ids: bool = True,
) -> WalkReport:
    """Fetch every page after ``progress.start`` from the first page not yet done, concurrently,
    handing each to ``sink`` in page order with the ids it listed and the progress that
    includes it. The report keeps every id listed only when ``keep_ids``.

    No bookmark moves here: a disturbed walk may have skipped records before its last key.
    """
    start = progress.start
    report = WalkReport(paging, ids=set() if keep_ids else None)
    pages = client.iter_pages(
        paging.path, _after_param(paging, start), count=paging.page_size,
        first_page=progress.pages_done + 1,
    )  # fmt: skip
    async for body in pages:
        report.totals.add(total_of(body))
        progress.totals.add(total_of(body))
        progress.pages_done += 1
        records = records_of(body)
        fresh = [r for r in records if start is None or paging.key_of(r) > start]
        report.saw(fresh)
        # Records sharing start's updatedAt are listed again and counted in the reported
        # total, so they count as seen too.
        listed = [paging.id_of(r) for r in records]
        if report.ids is not None:
            report.ids.update(listed)
        await sink(fresh, listed, progress)
    return report


async def keyset_walk(
    client: UpstreamClient,
    paging: UpdatedAfterPaging,
    start: Key | None,
    sink: Sink,
    *,
    keep_ids: bool = True,
) -> WalkReport:
    """Walk by bookmark, one page at a time; each batch goes to ``sink`` with its bookmark.
    The report keeps every id seen only when ``keep_ids``.

    Each query (one ``updatedAfter``) is a walk of its own under the page rules: a query that
    moved up to the bookmark may list again the records at its start, but pages of one query
    never repeat.
    """
    report = WalkReport(paging, ids=set() if keep_ids else None)
    after = start
    window = None if start is None else start[0]  # the updatedAt the query starts at
    page = 1
    size = paging.page_size
    rules = PageRules(paging.path, size)
    while True:
        start_at = None if window is None else (window, "")
        params = {**_after_param(paging, start_at), "count": size}
        body = await client.get_json(paging.path, {**params, "page": page})
        rules.check(page, body)
        records = records_of(body)
        fresh = [r for r in records if after is None or paging.key_of(r) > after]
        report.saw(fresh)
        if fresh:
            after = paging.key_of(fresh[-1])
        await sink(fresh, after)
        if len(records) < size:
            return report
        if after is not None and after[0] != window:
            window, page = after[0], 1  # move the query up to the bookmark
            rules = PageRules(paging.path, size)
        else:
            page += 1  # more than a page of records share one updatedAt: page through them
