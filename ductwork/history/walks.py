"""The listings of the changes feed's walks that a server keeps for one snapshot.

A walk's pages are slices of one listing, in (version, key) order: the keys its statement in
``history_feed.sql`` gives, each with its version. Without a kept listing, every page
aggregates the history's log again to find its slice (13-20 ms on a medium snapshot); with
one, the walk's second page reads the whole listing and the pages after slice it (the first
page reads only itself: most walks, a consumer polling for what is new, have no other). A
snapshot never changes, so a listing never goes stale: it goes with the snapshot's state.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ductwork.arrow_strings import StringSequence

KEPT_ENTRIES = 500_000  # entries of listings kept per snapshot and worker, in all


@dataclass(frozen=True)
class Listing:
    """The whole listing of a walk: its keys with their versions, in (version, key) order."""

    versions: np.ndarray  # int64
    keys: pa.Array  # strings

    @classmethod
    def of(cls, table: pa.Table) -> Listing:
        """From a table of (key, version) rows in (version, key) order."""
        versions = table.column(1).to_numpy().astype(np.int64, copy=False)
        return cls(versions, table.column(0).combine_chunks())

    def __len__(self) -> int:
        return len(self.versions)

    def after(self, version: int, key: str) -> int:
        """The index of the first entry strictly after (``version``, ``key``)."""
        low = int(np.searchsorted(self.versions, version, side="left"))
        high = int(np.searchsorted(self.versions, version, side="right"))
        return bisect_right(StringSequence(self.keys), key, low, high)

    def entries(self, start: int, count: int) -> list[tuple[str, int]]:
        """Up to ``count`` (key, version) entries from index ``start``."""
        keys = self.keys.slice(start, count).to_pylist()
        return list(zip(keys, self.versions[start : start + count].tolist(), strict=True))


class WalkListings:
    """The listings of the walks read from one snapshot, the most recently used kept up to
    ``max_entries`` entries in all (a larger listing is used once, not kept)."""

    def __init__(self, max_entries: int = KEPT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._kept: OrderedDict[tuple, Listing] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many listings are kept."""
        return len(self._kept)

    def get_or_read(self, walk: tuple, read: Callable[[], pa.Table]) -> Listing:
        """The listing kept for ``walk``, or the one ``read`` gives (its rows), kept if it
        fits."""
        with self._lock:
            found = self._kept.get(walk)
            if found is not None:
                self._kept.move_to_end(walk)
                return found
        listing = Listing.of(read())  # outside the lock: two pages at once both read it
        if len(listing) > self.max_entries:
            return listing
        with self._lock:
            if walk not in self._kept:
                self._kept[walk] = listing
                self._entries += len(listing)
            while self._entries > self.max_entries:
                _, dropped = self._kept.popitem(last=False)
                self._entries -= len(dropped)
        return listing
