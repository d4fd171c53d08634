"""Where each record of a paged list sits in its record file, by the record's key: the changes
feed reads the current records of a page's keys from the record file, a slice each, rather
than searching the snapshot's table for them (a scan of every key: 26-29 ms for 1000 keys
among 200,000, measured on a medium snapshot).

The keys are held sorted as fixed-width bytes (numpy ``S``), so a page's keys are found
together by one vectorised binary search; each key takes the width of the longest, and its
position 8 bytes more. Fixed width pads with NUL bytes, which numpy ignores at the end of a
value: a list with a NUL in any key, or whose keys would take more than ``MAX_BYTES`` at that
width, gets no index (its records are then read from the snapshot), and a key asked for with a
NUL is not found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_BYTES = 64 << 20  # per list and worker


@dataclass(frozen=True)
class KeyPositions:
    """A list's keys in binary order as fixed-width bytes, with each key's position."""

    keys: np.ndarray  # dtype S<width>, sorted
    positions: np.ndarray  # int64

    def find(self, keys: list[str]) -> list[int]:
        """The position of each of ``keys``; -1 for a key the list does not hold."""
        if not keys or not len(self.keys):
            return [-1] * len(keys)
        width = self.keys.dtype.itemsize
        wanted = [key.encode() for key in keys]
        probe = np.array(wanted, dtype=self.keys.dtype)  # a longer key is cut: see `fits`
        at = np.minimum(np.searchsorted(self.keys, probe), len(self.keys) - 1)
        found = self.keys[at] == probe
        if max(map(len, wanted)) > width or "\0" in "".join(keys):  # rare: checked per key
            fits = [len(b) <= width and b"\0" not in b for b in wanted]
            found &= np.array(fits, dtype=bool)
        return np.where(found, self.positions[at], -1).tolist()


def key_positions(keys: pa.Array, positions: pa.Array) -> KeyPositions | None:
    """The index of ``keys`` (strings) and their ``positions``; None when the keys cannot be
    held exactly as fixed-width bytes or would take more than ``MAX_BYTES``."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(positions, pa.ChunkedArray):
        positions = positions.combine_chunks()
    if keys.null_count:
        return None
    width = max(pc.max(pc.binary_length(keys)).as_py() or 0, 1)
    if width * len(keys) > MAX_BYTES or pc.any(pc.match_substring(keys, "\0")).as_py():
        return None
    fixed = np.array(keys.cast(pa.binary()).to_numpy(zero_copy_only=False), dtype=f"S{width}")
    at = positions.to_numpy().astype(np.int64, copy=False)
    order = np.argsort(fixed, kind="stable")
    return KeyPositions(fixed[order], at[order])
