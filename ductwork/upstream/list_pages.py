"""A page of a page-number list (the product family's and the warehouse's lists): what it holds,
and the rules a walk over such pages keeps so that a broken or hostile upstream cannot make it
walk forever.

The wire contract fixes the pagination: ``totalPages`` is ceil(``totalItems`` / ``count``), a
page before the last is full, the last holds the rest and a page past the end holds nothing.
Each page is judged by its own totals, so a list that grows or shrinks while it is walked
(each answer consistent in itself) passes; a page that contradicts its own totals, or repeats
a page already seen in the walk (an upstream that ignores ``page``), does not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NoReturn

from ductwork.contract.encoding import dumps
from ductwork.upstream.errors import UpstreamContractError

Record = dict[str, Any]


def pagination_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pagination object of a list body, top-level or nested in ``data`` ({} when absent)."""
    if "pagination" in body:
        return body["pagination"] or {}
    data = body.get("data")
    if isinstance(data, Mapping):
        return data.get("pagination") or {}
    return {}


def records_of(body: Mapping[str, Any]) -> list[Record]:
    """The records of a list page: ``data`` itself, or the one list nested in it (APIResponseV3)."""
    data = body.get("data")
    if isinstance(data, Mapping):
        return next((list(value) for value in data.values() if isinstance(value, list)), [])
    return list(data or [])


def total_of(body: Mapping[str, Any]) -> int:
    """The ``totalItems`` a list page reports."""
    return int(pagination_of(body).get("totalItems", 0))


def _count_member(pagination: Mapping[str, Any], name: str) -> int | None:
    value = pagination.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class PageRules:
    """The rules one walk over a page-number list keeps, page by page.

    ``count`` is the page size the walk asks for: the contract's totals are in its units.
    """

    def __init__(self, path: str, count: int) -> None:
        self._path = path
        self._count = count
        self._seen: dict[bytes, int] = {}  # the signature of each non-empty page: its number

    def check(self, page: int, body: Mapping[str, Any]) -> None:
        """Raise UpstreamContractError, naming the path and the rule, unless page ``page``
        agrees with its own totals and repeats no page this walk has seen."""
        records = records_of(body)
        pagination = pagination_of(body)
        items = _count_member(pagination, "totalItems")
        pages = _count_member(pagination, "totalPages")
        if items is None or pages is None:
            self._refuse(f"page {page} carries no totalItems and totalPages")
        promised = -(-items // self._count)
        if pages != promised:
            self._refuse(
                f"page {page} reports totalPages {pages:,}, but totalItems {items:,} at count "
                f"{self._count} make {promised:,} pages"
            )
        held = len(records)
        holds = f"holds {held} record{'' if held == 1 else 's'}"
        if page < pages and held != self._count:
            self._refuse(
                f"page {page} of {pages:,} {holds}; a page before the last holds count "
                f"({self._count})"
            )
        if page == pages and not 0 < held <= self._count:
            self._refuse(f"page {page}, the last, {holds}; the last holds 1 to {self._count}")
        if page > pages and held:
            self._refuse(f"page {page} lies past the last ({pages:,}) yet {holds}")
        if held:
            signature = _signature(records)
            first_seen = self._seen.setdefault(signature, page)
            if first_seen != page:
                self._refuse(f"page {page} repeats page {first_seen} (the upstream ignores page?)")

    def _refuse(self, rule: str) -> NoReturn:
        raise UpstreamContractError(f"GET {self._path}: refused, {rule}")


def _signature(records: list[Record]) -> bytes:
    """What tells pages apart: their length and first and last records. Serialising only
    those two keeps the check cheap on lists of thousands of pages; two pages of one walk
    that agree on both are the same page asked twice."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(len(records).to_bytes(8, "big"))
    digest.update(dumps(records[0]))
    digest.update(b"\n")
    digest.update(dumps(records[-1]))
    return digest.digest()
