"""Ordered record tables: pre-serialised JSON bodies beside the keys that order them.

Pages are slices of the body list; the keys answer "first record after X" by bisection.
Mutations only ever move records to the end (their new instant is later than every other),
so no table needs a general insert.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

Record = dict[str, Any]


class LeadList:
    """Lead list items ordered by (``CreatedDate``, ``Id``)."""

    def __init__(self, keys: list[tuple[str, str]], bodies: list[bytes]) -> None:
        self.keys = keys
        self.bodies = bodies

    def first_after(self, key: tuple[str, str]) -> int:
        """Index of the first lead whose key is strictly greater than ``key``."""
        return bisect.bisect_right(self.keys, key)

    def first_created_after(self, created: str) -> int:
        """Index of the first lead created strictly later than ``created``."""
        return bisect.bisect_left(self.keys, (created + "\uffff",))

    def index_of(self, key: tuple[str, str]) -> int | None:
        """Position of the lead with exactly this key, if any."""
        at = bisect.bisect_left(self.keys, key)
        return at if at < len(self.keys) and self.keys[at] == key else None

    def remove(self, lead_ids: Iterable[str]) -> list[str]:
        """Drop the leads with these ids (one pass over the list); returns the ids dropped, in
        the list's order."""
        doomed = set(lead_ids)
        dropped = [key[1] for key in self.keys if key[1] in doomed]
        if dropped:
            kept = [
                (k, b) for k, b in zip(self.keys, self.bodies, strict=True) if k[1] not in doomed
            ]
            self.keys = [k for k, _ in kept]
            self.bodies = [b for _, b in kept]
        return dropped

    def append(self, key: tuple[str, str], body: bytes) -> None:
        """Add a lead later than every other."""
        if self.keys and key <= self.keys[-1]:
            raise ValueError(f"lead {key} is not later than every other")
        self.keys.append(key)
        self.bodies.append(body)


class AssetTable:
    """Digital assets ordered by (``updatedAt``, ``assetId``), keyed by ``asset_key``."""

    def __init__(self, keys: list[str], bodies: list[bytes]) -> None:
        self.keys = keys
        self.bodies = bodies
        self._key_of: dict[str, str] | None = None  # assetId -> key, built on first need

    def __len__(self) -> int:
        return len(self.keys)

    def first_updated_after(self, updated_at: str) -> int:
        """Index of the first asset updated strictly later than ``updated_at``.

        Keys are ``updatedAt`` + space + ``assetId``; ``!`` sorts right after the space.
        """
        return bisect.bisect_left(self.keys, updated_at + "!")

    def key_of(self) -> dict[str, str]:
        """assetId -> current key (built lazily: only mutations need it)."""
        if self._key_of is None:
            self._key_of = {key.partition(" ")[2]: key for key in self.keys}
        return self._key_of

    def body_of(self, asset_id: str) -> bytes | None:
        """The current JSON of one asset."""
        key = self.key_of().get(asset_id)
        if key is None:
            return None
        return self.bodies[bisect.bisect_left(self.keys, key)]

    def remove(self, asset_ids: Iterable[str]) -> None:
        """Drop these assets (one pass over the table)."""
        index = self.key_of()
        doomed = {index.pop(asset_id) for asset_id in asset_ids if asset_id in index}
        if not doomed:
            return
        kept = [(k, b) for k, b in zip(self.keys, self.bodies, strict=True) if k not in doomed]
        self.keys = [k for k, _ in kept]
        self.bodies = [b for _, b in kept]

    def append(self, key: str, body: bytes) -> None:
        """Add an asset later than every other."""
        if self.keys and key <= self.keys[-1]:
            raise ValueError(f"asset {key!r} is not later than every other")
        self.keys.append(key)
        self.bodies.append(body)
        self.key_of()[key.partition(" ")[2]] = key


class LeadBook(Mapping[str, Record]):
    """Lead id -> list item, read-only view: overridden leads first, others regenerated."""

    def __init__(
        self,
        leads: LeadList,
        lookup: Callable[[str], tuple[Record, Record] | None],
    ) -> None:
        self._leads = leads
        self._lookup = lookup

    def __getitem__(self, lead_id: str) -> Record:
        found = self._lookup(lead_id)
        if found is None:
            raise KeyError(lead_id)
        return found[0]

    def __iter__(self) -> Iterator[str]:
        return (key[1] for key in self._leads.keys)

    def __len__(self) -> int:
        return len(self._leads.keys)
