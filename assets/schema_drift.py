"""Noticing schema drift in upstream records, without failing on it.

The wire contract says what members a record has and their types. A record that brings a
member nobody announced, lacks one every record should have, or carries one with another
type is still stored whole (its JSON is the truth the read API serves); the run only counts
such records, so a change of the upstream's schema shows in the run's metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JsonType = type | tuple[type, ...]


@dataclass(frozen=True)
class RecordShape:
    """The members a record type is known to have, each with its JSON type(s)."""

    required: Mapping[str, JsonType]
    optional: Mapping[str, JsonType] = field(default_factory=dict)

    def drift(self, records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
        """Counts of records with unknown, missing or mistyped members, and with any of them."""
        known = {**self.required, **self.optional}
        unknown = missing = mistyped = drifted = 0
        for record in records:
            has_unknown = any(name not in known for name in record)
            has_missing = any(name not in record for name in self.required)
            has_mistyped = any(
                name in record and not isinstance(record[name], kind)
                for name, kind in known.items()
            )
            unknown += has_unknown
            missing += has_missing
            mistyped += has_mistyped
            drifted += has_unknown or has_missing or has_mistyped
        return {
            "schema_drift_records": drifted,
            "schema_drift_unknown_members": unknown,
            "schema_drift_missing_members": missing,
            "schema_drift_mistyped_members": mistyped,
        }


NULL = type(None)
UNIT_RECORD = RecordShape(
    required={
        "sku": str,
        "srn": str,
        "brand": str,
        "category": str,
        "subcategory": str,
        "series": dict,
        "family": dict,
        "description": (str, NULL),
        "status": str,
        "specifications": dict,
        "performance": (dict, NULL),
        "compatibility": dict,
        "images": list,
        "updatedAt": str,
        "_links": dict,
    },
    optional={"x-legacyCode": (str, NULL)},
)
