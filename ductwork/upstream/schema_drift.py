"""Noticing schema drift in upstream records, without failing on it.

The wire contract says what members a record has and their types. A record that brings a
member nobody announced, lacks one every record should have, or carries one with another
type is still stored whole (its JSON is the truth the read API serves); the run only counts
such records, so a change of the upstream's schema shows in the run's metadata.

Each stream declares the shape of its records in the registry (``ductwork.streams``), written
from the wire contract and the service spec. Members the upstream is known to leave out now
and then are optional: their absence is no drift, a value of another type is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

JsonType = type | tuple[type, ...]
NULL = type(None)
NUMBER = (int, float)


@dataclass(frozen=True)
class RecordShape:
    """The members a record type is known to have, each with its JSON type(s), and notes on
    what some of them mean."""

    required: Mapping[str, JsonType]
    optional: Mapping[str, JsonType] = field(default_factory=dict)
    # What some members mean, for the read API's documentation.
    notes: Mapping[str, str] = field(default_factory=dict)

    # Worked out once per shape: the count runs on every record of every sync.
    @cached_property
    def known_names(self) -> frozenset[str]:
        """Every member the contract names, required or optional."""
        return frozenset(self.required) | frozenset(self.optional)

    @cached_property
    def required_names(self) -> frozenset[str]:
        """The members every record has."""
        return frozenset(self.required)

    @cached_property
    def typed_members(self) -> tuple[tuple[str, frozenset[type]], ...]:
        """(member, the exact Python types its JSON values may decode to) for every known
        member. Exact types, not isinstance: JSON's booleans are not numbers."""
        return tuple(
            (name, frozenset(kind) if isinstance(kind, tuple) else frozenset((kind,)))
            for name, kind in (*self.required.items(), *self.optional.items())
        )

    def drift(self, records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
        """Counts of records with unknown, missing or mistyped members, and with any of them."""
        tally = DriftTally(self)
        tally.count(records)
        return tally.as_metadata()


# A record's drift: whether it has unknown members, lacks required ones, has mistyped ones.
Verdict = tuple[bool, bool, bool]


@dataclass
class DriftTally:
    """Running drift counts of one record type across the pages or batches of a run."""

    shape: RecordShape
    records: int = 0
    unknown: int = 0
    missing: int = 0
    mistyped: int = 0

    # Verdicts by record signature (member names and value types, in order): nearly every
    # record of a stream has the same few signatures, so most records cost a lookup.
    _verdicts: dict[tuple[tuple[str, ...], tuple[type, ...]], Verdict] = field(
        default_factory=dict, repr=False, compare=False
    )

    def count(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Add a batch of records to the counts."""
        self.add(self.verdict(record) for record in records)

    def verdict(self, record: Mapping[str, Any]) -> Verdict:
        """Whether ``record`` has unknown members, lacks required ones, or has mistyped ones;
        counted only once ``add`` is given it."""
        signature = (tuple(record), tuple(map(type, record.values())))
        verdict = self._verdicts.get(signature)
        if verdict is None:
            verdict = self._judge(record)
            if len(self._verdicts) < _MAX_SIGNATURES:
                self._verdicts[signature] = verdict
        return verdict

    def add(self, verdicts: Iterable[Verdict]) -> None:
        """Add the verdicts of a batch of records to the counts."""
        for has_unknown, has_missing, has_mistyped in verdicts:
            self.unknown += has_unknown
            self.missing += has_missing
            self.mistyped += has_mistyped
            self.records += has_unknown or has_missing or has_mistyped

    def _judge(self, record: Mapping[str, Any]) -> Verdict:
        """Whether ``record`` has unknown members, lacks required ones, or has mistyped ones."""
        names = record.keys()
        has_mistyped = False
        for name, kinds in self.shape.typed_members:
            value = record.get(name, _ABSENT)
            if value is not _ABSENT and type(value) not in kinds:
                has_mistyped = True
                break
        return (
            not names <= self.shape.known_names,
            not self.shape.required_names <= names,
            has_mistyped,
        )

    def as_metadata(self) -> dict[str, int]:
        """The counts as run metadata."""
        return {
            "schema_drift_records": self.records,
            "schema_drift_unknown_members": self.unknown,
            "schema_drift_missing_members": self.missing,
            "schema_drift_mistyped_members": self.mistyped,
        }


_ABSENT = object()
_MAX_SIGNATURES = 4096  # a stream of ever-new shapes is judged record by record past this
