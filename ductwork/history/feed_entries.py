"""What a changes-feed page is made of: the publishes of the history, its entries (``Change``)
and how they are written, and the current records a server may hold for them. Shared by the
feed's reads (``feed``), its pages held as columns (``page_columns``) and the change files
(``change_files``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ductwork.contract.encoding import dumps, format_datetime

if TYPE_CHECKING:  # a server's modules: numpy and Arrow stay out of a sync that reads no feed
    import numpy as np
    import pyarrow as pa


class RecordsNow(Protocol):
    """A stream's current records (UTF-8 JSON), when a server holds them quicker to hand than
    the snapshot's tables; each method answers None when it cannot tell (then they are read
    from the snapshot)."""

    def records_by_key(self, keys: list[str]) -> dict[str, bytes] | None:
        """The records of ``keys`` held, by key (a key without a record is left out)."""

    def record_positions(self, keys: pa.Array) -> np.ndarray | None:
        """Where the record of each of ``keys`` (strings) is held (int64, -1 for a key without
        one)."""

    def records_at(self, positions: np.ndarray) -> pa.Array:
        """The records at ``positions`` (``record_positions``'), in a binary array, null at
        -1."""


@dataclass(frozen=True)
class Publish:
    """One publish of the history: its sequence number, snapshot version and time."""

    seq: int
    version: str
    published_at: datetime


class Change(NamedTuple):
    """One entry of a page: ``record`` is the record's JSON as stored, UTF-8 (None for a
    delete). A named tuple: a page makes a thousand of them, and making frozen dataclasses
    took about a fifth of a page's read (profiled)."""

    op: str
    key: str
    version: str
    changed_at: datetime
    record: bytes | None

    def json_bytes(self) -> bytes:
        """The entry as the feed writes it: ``op``, ``key``, ``version``, ``changedAt``, then
        the record as stored (``null`` for a delete)."""
        return b"".join(_entry_parts(self))


def write_entries(changes: Sequence[Change], separator: bytes) -> bytes:
    """The entries' ``json_bytes`` joined by ``separator``, copied once."""
    parts: list[bytes] = []
    for change in changes:
        parts += _entry_parts(change)
        parts.append(separator)
    return b"".join(parts[:-1])


def _entry_parts(change: Change) -> tuple[bytes, ...]:
    record = b"null" if change.record is None else change.record
    members = publish_members(change.version, change.changed_at)
    return (opening_of(change.op), dumps(change.key), members, record, b"}")


@lru_cache(maxsize=8)
def opening_of(op: str) -> bytes:
    """An entry's text up to its key: ``op`` and the ``key`` member's name."""
    return b'{"op":' + dumps(op) + b',"key":'


@lru_cache(maxsize=256)
def publish_members(version: str, changed_at: datetime) -> bytes:
    """An entry's ``version`` and ``changedAt`` members and the ``record`` member's name: the
    same for every entry a publish changed, so written once per publish rather than per
    entry (formatting the time took about half of a page's serialisation)."""
    members = dumps({"version": version, "changedAt": format_datetime(changed_at)})
    return b"," + members[1:-1] + b',"record":'
