"""How a list of the upstream pages, declared as data by the stream that reads it.

Three kinds of paging, each walked by one module with the refusal rules of its kind built in:

- page numbers (``page`` and ``count``, with ``totalPages``): the contract's default, walked by
  ``ductwork.upstream.list_pages`` for any path (a ``WholeList`` names only its path);
- ``CursorPaging``: a list ordered by (a created date-time, an id) and asked for the records
  after a cursor of those two members (``ductwork.upstream.cursor_walk``);
- ``UpdatedAfterPaging``: page numbers from an ``updatedAfter`` on, ordered by (an updated
  date-time, an id), with a keyset walk to repair a walk that changes disturbed
  (``ductwork.upstream.updated_after_walk``).

A cursor or resume point is always the pair (date-time in the contract's form, id as text),
whatever form the upstream wrote the date-time in, so that pairs compare as the list orders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ductwork.upstream.client import LIST_PAGE_SIZE
from ductwork.upstream.timestamps import canonical_or_received

Record = dict[str, Any]
# (date-time in the contract's form, id): compares in the order the list is sorted by.
Position = tuple[str, str]


def position_of(record: Record, time_member: str, id_member: str) -> Position:
    """Where ``record`` stands in a list ordered by (``time_member``, ``id_member``)."""
    return (canonical_or_received(record.get(time_member)), str(record[id_member]))


@dataclass(frozen=True)
class CursorPaging:
    """A list paged by a cursor: each page asked for with the (created, id) of the last record
    read, in ``created_parameter`` and ``id_parameter``; a page shorter than ``page_size`` is
    the last. ``created_after_parameter`` asks for the records created after an instant (a
    window of recent records read again). ``noun`` names the records in errors, ``item`` one
    of them (the read API's messages and its OpenAPI document)."""

    path: str
    created_member: str
    id_member: str
    created_parameter: str
    id_parameter: str
    created_after_parameter: str
    noun: str = "records"
    item: str = "record"
    page_size: int = LIST_PAGE_SIZE

    @property
    def members(self) -> tuple[str, str]:
        """The record members a cursor is made of, as the sync state keeps them."""
        return (self.created_member, self.id_member)

    def cursor_of(self, record: Record) -> Position:
        """The cursor that points just after ``record``."""
        return position_of(record, self.created_member, self.id_member)

    def parameters(self, after: Position | None, created_after: str | None) -> dict[str, Any]:
        """The query of the page after cursor ``after`` (None: the first page), of records
        created after ``created_after`` when given."""
        query: dict[str, Any] = {"count": self.page_size}
        if created_after is not None:
            query[self.created_after_parameter] = created_after
        if after is not None:
            query[self.created_parameter], query[self.id_parameter] = after
        return query


@dataclass(frozen=True)
class UpdatedAfterPaging:
    """A page-numbered list that takes ``updated_after_parameter`` (records updated strictly
    after an instant) and is ordered by (``updated_member``, ``id_member``)."""

    path: str
    updated_member: str
    id_member: str
    updated_after_parameter: str = "updatedAfter"
    page_size: int = LIST_PAGE_SIZE

    @property
    def members(self) -> tuple[str, str]:
        """The record members a resume point is made of, as the sync state keeps them."""
        return (self.updated_member, self.id_member)

    def key_of(self, record: Record) -> Position:
        """The resume point just after ``record``."""
        return position_of(record, self.updated_member, self.id_member)

    def id_of(self, record: Record) -> str:
        """The record's id, as text."""
        return str(record[self.id_member])
