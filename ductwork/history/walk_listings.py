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
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ductwork.arrow_strings import StringSequence

KEPT_ENTRIES = 500_000  # entries of listings kept per snapshot and worker, in all
TOO_LARGE_REMEMBERED = 1024  # walks known to have a listing too large to keep, per snapshot
# Characters a JSON string escapes: a key holding one is written by ``dumps``, not as is.
_ESCAPED = r'["\\\x00-\x1f]'


def writable_as_is(keys: pa.Array) -> bool:
    """Whether every key's JSON string is the key between quotes (no character to escape)."""
    return not pc.any(pc.match_substring_regex(keys, _ESCAPED)).as_py()


@dataclass
class Listing:
    """The whole listing of a walk: its keys with their versions, in (version, key) order."""

    versions: np.ndarray  # int64
    keys: pa.Array  # strings
    # Whether every key's JSON is the key between quotes (``writable_as_is``).
    keys_as_is: bool = False
    _positions: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, table: pa.Table) -> Listing:
        """From a table of (key, version) rows in (version, key) order."""
        versions = table.column(1).to_numpy().astype(np.int64, copy=False)
        keys = table.column(0).combine_chunks()
        return cls(versions, keys, writable_as_is(keys))

    def __len__(self) -> int:
        return len(self.versions)

    def after(self, version: int, key: str) -> int:
        """The index of the first entry strictly after (``version``, ``key``)."""
        low = int(np.searchsorted(self.versions, version, side="left"))
        high = int(np.searchsorted(self.versions, version, side="right"))
        return bisect_right(StringSequence(self.keys), key, low, high)

    def record_positions(self, find: Callable[[pa.Array], np.ndarray | None]) -> np.ndarray | None:
        """Where each key's current record is held, as ``find`` gives them for the whole
        listing: found at the first need and kept (a listing belongs to one snapshot, whose
        records do not move), so a page slices them instead of searching its keys. Two
        threads may both find them first: the answers are the same."""
        if self._positions is None:
            self._positions = find(self.keys)
        return self._positions

    def columns(self, start: int, count: int) -> tuple[pa.Array, np.ndarray]:
        """Up to ``count`` keys and their versions from index ``start``."""
        return self.keys.slice(start, count), self.versions[start : start + count]

    def entries(self, start: int, count: int) -> list[tuple[str, int]]:
        """Up to ``count`` (key, version) entries from index ``start``."""
        keys = self.keys.slice(start, count).to_pylist()
        return list(zip(keys, self.versions[start : start + count].tolist(), strict=True))


class WalkListings:
    """The listings of the walks read from one snapshot, the most recently used kept up to
    ``max_entries`` entries in all. A walk whose listing is larger is remembered as such, and
    its pages are read alone, as a walk's first page is."""

    def __init__(self, max_entries: int = KEPT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._kept: OrderedDict[tuple, Listing] = OrderedDict()
        self._entries = 0
        self._too_large: OrderedDict[tuple, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many listings are kept."""
        return len(self._kept)

    def get_or_read(self, walk: tuple, read: Callable[[], pa.Table]) -> Listing | None:
        """The listing kept for ``walk``, or the one ``read`` gives (its rows), now kept; None
        for a walk whose listing is too large to keep (then the caller reads its page alone:
        reading the whole listing for every page would cost more)."""
        with self._lock:
            if walk in self._too_large:
                return None
            found = self._kept.get(walk)
            if found is not None:
                self._kept.move_to_end(walk)
                return found
        listing = Listing.of(read())  # outside the lock: two pages at once both read it
        if len(listing) > self.max_entries:
            with self._lock:
                self._too_large[walk] = None
                if len(self._too_large) > TOO_LARGE_REMEMBERED:
                    self._too_large.popitem(last=False)
            return None
        with self._lock:
            if walk not in self._kept:
                self._kept[walk] = listing
                self._entries += len(listing)
            while self._entries > self.max_entries:
                _, dropped = self._kept.popitem(last=False)
                self._entries -= len(dropped)
        return listing
