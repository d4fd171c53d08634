"""Reading a whole page-number list so that the result is consistent.

The upstream's data may change while we page (positions shift under page/count). A read is
accepted only when every page reported the same total and the records, unique by key, number
exactly that total; otherwise the list is read again, a bounded number of times.

Every read also digests the pages' raw bodies, so that a later run can tell whether the list
is still what was stored without parsing it (``digest_known_pages``).

``read_list_batches`` hands each page's records to the caller as the page arrives, to be made
into a batch (an Arrow table, say), and keeps only their keys for the consistency check: the
parsed records of a page are dropped once its batch is made. It still refuses a list that
reports more than ``MAX_LIST_RECORDS``: a hostile total cannot make it hold keys and batches
without end (each page is held to its own totals, see ``list_pages``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Hashable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ductwork.upstream.client import (
    LIST_PAGE_SIZE,
    Params,
    UpstreamClient,
    UpstreamContractError,
    UpstreamError,
)
from ductwork.upstream.list_pages import records_of, total_of

Record = dict[str, Any]
B = TypeVar("B")
# The most records a whole-list read holds: ten times the largest catalog list the sandbox's
# large scale serves (50,000 products), and still a few gigabytes of parsed records at most.
MAX_LIST_RECORDS = 500_000
# Answers that settle a probed page: the page itself, or its absence from a list that shrank
# (a page past the end). Anything else is retried, or fails the probe, like any request.
_PROBE_SETTLED = frozenset({200, 400, 404})


@dataclass(frozen=True)
class ListRead:
    """A consistent read of one list."""

    records: list[Record]
    reported_total: int
    pages: int
    attempts: int
    digest: str  # of the pages' raw bodies, as ``bodies_digest`` computes it


@dataclass(frozen=True)
class BatchedListRead(Generic[B]):
    """A consistent read of one list, as one batch per page.

    ``kept`` is None when every key was read once: the batches' records, in order, are the
    list. When a key was read on two pages (the list moved while it was read), ``kept`` gives
    the positions, counted across the batches, of the records the list holds: for each key,
    in the order keys were first read, the record read last.
    """

    batches: list[B]
    kept: list[int] | None
    records: int  # the list's records, one per key
    reported_total: int
    pages: int
    attempts: int
    digest: str  # of the pages' raw bodies, as ``bodies_digest`` computes it


class _PageHasher:
    """Digests page bodies in order (each body's length first, so no two sequences of pages
    run together into the same bytes)."""

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)

    def add(self, body: bytes) -> None:
        self._hash.update(len(body).to_bytes(8, "big"))
        self._hash.update(body)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


async def read_whole_list(
    client: UpstreamClient,
    path: str,
    key: Callable[[Record], Hashable],
    params: Params | None = None,
    *,
    max_attempts: int = 4,
    count: int = LIST_PAGE_SIZE,
) -> ListRead:
    """Read every page of ``path``, ``count`` records a page, until one pass is
    self-consistent; UpstreamContractError for a list larger than ``MAX_LIST_RECORDS``."""
    read = await read_list_batches(
        client, path, key, _as_read, params, max_attempts=max_attempts, count=count
    )
    records = [record for batch in read.batches for record in batch]
    if read.kept is not None:
        records = [records[position] for position in read.kept]
    return ListRead(records, read.reported_total, read.pages, read.attempts, read.digest)


def _as_read(records: list[Record]) -> list[Record]:
    return records


async def read_list_batches(
    client: UpstreamClient,
    path: str,
    key: Callable[[Record], Hashable],
    batch: Callable[[list[Record]], B],
    params: Params | None = None,
    *,
    max_attempts: int = 4,
    count: int = LIST_PAGE_SIZE,
) -> BatchedListRead[B]:
    """Read every page of ``path``, ``count`` records a page, until one pass is
    self-consistent, making each page's records into a batch as the page arrives;
    UpstreamContractError for a list larger than ``MAX_LIST_RECORDS``."""
    seen_totals: list[int] = []
    for attempt in range(1, max_attempts + 1):
        position_of: dict[Hashable, int] = {}  # each key's last position, in first-read order
        batches: list[B] = []
        totals: set[int] = set()
        read = 0
        hasher = _PageHasher()
        async with aclosing(client.iter_page_answers(path, params, count=count)) as answers:
            async for answer in answers:
                total = total_of(answer.document)
                if total > MAX_LIST_RECORDS:
                    raise UpstreamContractError(
                        f"GET {path}: refused, page {len(batches) + 1} reports {total:,} items; "
                        f"a whole-list read holds at most {MAX_LIST_RECORDS:,}"
                    )
                hasher.add(answer.body)
                totals.add(total)
                records = records_of(answer.document)
                for record in records:
                    position_of[key(record)] = read
                    read += 1
                batches.append(batch(records))
        total = totals.pop() if len(totals) == 1 else -1
        if total == len(position_of):
            kept = None if read == total else list(position_of.values())
            return BatchedListRead(
                batches, kept, total, total, len(batches), attempt, hasher.hexdigest()
            )
        seen_totals.append(len(position_of))
    raise UpstreamError(
        f"{path}: the list kept changing while it was read ({max_attempts} attempts, "
        f"records per attempt {seen_totals}); nothing was written"
    )


def bodies_digest(*bodies: bytes) -> str:
    """The digest of pages with these raw bodies, in this order (as ``ListRead.digest``)."""
    hasher = _PageHasher()
    for body in bodies:
        hasher.add(body)
    return hasher.hexdigest()


async def digest_known_pages(
    client: UpstreamClient, path: str, pages: int, *, count: int = LIST_PAGE_SIZE
) -> str | None:
    """Fetch pages 1 to ``pages`` of ``path`` (``count`` records a page) all at once, unparsed,
    and digest their bodies; None when any of them answers other than 200.

    Equal to the ``digest`` of an earlier ``read_whole_list`` of ``path`` that read ``pages`` pages
    exactly when every page came back byte for byte the same. The first page is among them, so its
    ``totalPages`` is still ``pages``: nothing needs parsing to know the list is unchanged.
    Pages that differ (a change, or a malformed body) simply digest differently, and a list
    that shrank answers a page past its end as it will: the caller then reads the list in full.
    """
    answers = await asyncio.gather(*(
        client.get(path, {"count": count, "page": page}, accept=_PROBE_SETTLED)
        for page in range(1, pages + 1)
    ))  # fmt: skip
    if any(answer.status != 200 for answer in answers):
        return None
    return bodies_digest(*(answer.body for answer in answers))
