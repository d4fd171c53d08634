"""Reading a whole page-number list so that the result is consistent.

The upstream's data may change while we page (positions shift under page/count). A read is
accepted only when every page reported the same total and the records, unique by key, number
exactly that total; otherwise the list is read again, a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pipelines.upstream_client import Params, UpstreamClient, UpstreamError

Record = dict[str, Any]


@dataclass(frozen=True)
class ListRead:
    """A consistent read of one list."""

    records: list[Record]
    reported_total: int
    pages: int
    attempts: int


def records_of(body: Mapping[str, Any]) -> list[Record]:
    """The records of a product or warehouse list page, or of a pairing list page."""
    data = body.get("data")
    if isinstance(data, Mapping):
        return list(data.get("pairings") or [])
    return list(data or [])


def total_of(body: Mapping[str, Any]) -> int:
    """The ``totalItems`` a list page reports."""
    pagination = body.get("pagination")
    if pagination is None and isinstance(body.get("data"), Mapping):
        pagination = body["data"].get("pagination")
    return int((pagination or {}).get("totalItems", 0))


async def read_whole_list(
    client: UpstreamClient,
    path: str,
    key: Callable[[Record], Hashable],
    params: Params | None = None,
    *,
    max_attempts: int = 4,
) -> ListRead:
    """Read every page of ``path`` until one pass is self-consistent."""
    seen_totals: list[int] = []
    for attempt in range(1, max_attempts + 1):
        by_key: dict[Hashable, Record] = {}
        totals: set[int] = set()
        pages = 0
        async for body in client.iter_pages(path, params):
            pages += 1
            totals.add(total_of(body))
            for record in records_of(body):
                by_key[key(record)] = record
        total = totals.pop() if len(totals) == 1 else -1
        if total == len(by_key):
            return ListRead(list(by_key.values()), total, pages, attempt)
        seen_totals.append(len(by_key))
    raise UpstreamError(
        f"{path}: the list kept changing while it was read ({max_attempts} attempts, "
        f"records per attempt {seen_totals}); nothing was written"
    )
