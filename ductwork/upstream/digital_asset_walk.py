"""Walking the warehouse digital-asset list, ordered by (updatedAt, assetId).

Two ways, one result: every asset whose bookmark is later than the start.
- ``page_walk`` fetches pages concurrently (fast). Assets that change while it pages shift the
  positions under page/count, so it reports whether the walk was self-consistent: one total on
  every page and exactly that many distinct ids. Its progress (pages done, totals seen) is
  committed with the pages' rows, so a walk cut short resumes after the last committed page.
- ``keyset_walk`` moves ``updatedAfter`` along the last bookmark seen, one page at a time. A
  changed asset only moves later, where the walk still meets it, so positions cannot shift
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
from ductwork.contract.paths import WAREHOUSE_DIGITAL_ASSETS
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.list_pages import PageRules, records_of, total_of
from ductwork.upstream.timestamps import canonical_or_received

PAGE = 1000
Record = dict[str, Any]
Key = tuple[str, str]
Sink = Callable[[list[Record], Key | None], Awaitable[None]]


def key_of(record: Record) -> Key:
    """The bookmark of an asset: (updatedAt in the contract's form, assetId)."""
    return (canonical_or_received(record.get("updatedAt")), str(record["assetId"]))


def just_before(updated_at: str) -> str:
    """An ``updatedAfter`` that still includes assets updated exactly at ``updated_at``."""
    return format_datetime(parse_received_datetime(updated_at) - timedelta(milliseconds=1))


@dataclass
class WalkReport:
    """What a walk saw."""

    pages: int = 0
    records: int = 0
    ids: set[str] = field(default_factory=set)
    totals: set[int] = field(default_factory=set)
    last: Key | None = None

    @property
    def consistent(self) -> bool:
        """One reported total on every page, and exactly that many distinct assets."""
        return len(self.totals) <= 1 and len(self.ids) == next(iter(self.totals), 0)

    def saw(self, records: list[Record]) -> None:
        self.pages += 1
        self.records += len(records)
        for record in records:
            self.ids.add(str(record["assetId"]))
            key = key_of(record)
            if self.last is None or key > self.last:
                self.last = key


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


# A page walk's sink: the page's fresh assets, every id the page listed, the walk's progress.
PageSink = Callable[[list[Record], list[str], PageWalkProgress], Awaitable[None]]


def _after_param(start: Key | None) -> dict[str, str]:
    return {} if start is None or not start[0] else {"updatedAfter": just_before(start[0])}


async def page_walk(
    client: UpstreamClient, progress: PageWalkProgress, sink: PageSink
) -> WalkReport:
    """Fetch every page after ``progress.start`` from the first page not yet done, concurrently,
    handing each to ``sink`` in page order with the ids it listed and the progress that
    includes it.

    No bookmark moves here: a disturbed walk may have skipped assets before its last key.
    """
    start = progress.start
    report = WalkReport()
    pages = client.iter_pages(
        WAREHOUSE_DIGITAL_ASSETS, _after_param(start), count=PAGE,
        first_page=progress.pages_done + 1,
    )  # fmt: skip
    async for body in pages:
        report.totals.add(total_of(body))
        progress.totals.add(total_of(body))
        progress.pages_done += 1
        records = records_of(body)
        fresh = [r for r in records if start is None or key_of(r) > start]
        report.saw(fresh)
        # Assets sharing start's updatedAt are listed again and counted in the reported
        # total, so they count as seen too.
        listed = [str(r["assetId"]) for r in records]
        report.ids.update(listed)
        await sink(fresh, listed, progress)
    return report


async def keyset_walk(client: UpstreamClient, start: Key | None, sink: Sink) -> WalkReport:
    """Walk by bookmark, one page at a time; each batch goes to ``sink`` with its bookmark.

    Each query (one ``updatedAfter``) is a walk of its own under the page rules: a query that
    moved up to the bookmark may list again the assets at its start, but pages of one query
    never repeat.
    """
    report = WalkReport()
    after = start
    window = None if start is None else start[0]  # the updatedAt the query starts at
    page = 1
    rules = PageRules(WAREHOUSE_DIGITAL_ASSETS, PAGE)
    while True:
        params = {**_after_param(None if window is None else (window, "")), "count": PAGE}
        body = await client.get_json(WAREHOUSE_DIGITAL_ASSETS, {**params, "page": page})
        rules.check(page, body)
        records = records_of(body)
        fresh = [r for r in records if after is None or key_of(r) > after]
        report.saw(fresh)
        if fresh:
            after = key_of(fresh[-1])
        await sink(fresh, after)
        if len(records) < PAGE:
            return report
        if after is not None and after[0] != window:
            window, page = after[0], 1  # move the query up to the bookmark
            rules = PageRules(WAREHOUSE_DIGITAL_ASSETS, PAGE)
        else:
            page += 1  # more than a page of assets share one updatedAt: page through them
