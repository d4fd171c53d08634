"""Salesforce's two forms of one id: 15 characters, or 18 with a case-safe suffix.

With ``Faults.lead_detail_ids = "case_safe"`` the lead list names every lead by the first 15
characters of its id, and its detail answers with the whole 18-character id: one lead, named
two ways by two paths. A 15-character id is found again through an index of the leads' short
forms, extended as leads are added.
"""

from __future__ import annotations

import weakref

from ductwork.contract.encoding import dumps, loads
from sandbox.record_tables import LeadList

SHORT_LENGTH = 15


def short_form(lead_id: str) -> str:
    """The 15-character form of an 18-character id."""
    return lead_id[:SHORT_LENGTH]


def with_short_id(body: bytes) -> bytes:
    """A list item's JSON with its ``Id`` in the 15-character form."""
    item = loads(body)
    item["Id"] = short_form(str(item["Id"]))
    return dumps(item)


class _ShortIndex:
    """15-character form -> id, over the leads a list held when last asked."""

    def __init__(self) -> None:
        self.full: dict[str, str] = {}
        self.indexed = 0

    def lookup(self, leads: LeadList, short: str) -> str | None:
        for _, lead_id in leads.keys[self.indexed :]:  # leads are only ever appended
            self.full.setdefault(short_form(lead_id), lead_id)
        self.indexed = len(leads.keys)
        return self.full.get(short)


_INDEXES: weakref.WeakKeyDictionary[LeadList, _ShortIndex] = weakref.WeakKeyDictionary()


def full_id(leads: LeadList, lead_id: str) -> str | None:
    """The id of the lead ``lead_id`` names in either form, or None when none has it."""
    if len(lead_id) != SHORT_LENGTH:
        return lead_id
    return _INDEXES.setdefault(leads, _ShortIndex()).lookup(leads, lead_id)
