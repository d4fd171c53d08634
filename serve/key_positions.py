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

    def find_column(self, keys: pa.Array) -> np.ndarray:
        """The position of each of ``keys`` (strings) as int64; -1 for a key the list does
        not hold."""
        if not len(keys) or not len(self.keys):
            return np.full(len(keys), -1, dtype=np.int64)
        width = self.keys.dtype.itemsize
        binary = keys.cast(pa.binary())
        # A longer key is cut to the width, and a NUL ends a fixed-width value: such keys are
        # none of the list's, whatever the search finds.
        probe = np.array(binary.to_numpy(zero_copy_only=False), dtype=self.keys.dtype)
        at = np.minimum(np.searchsorted(self.keys, probe), len(self.keys) - 1)
        found = self.keys[at] == probe
        fits = pc.and_(
            pc.less_equal(pc.binary_length(binary), width),
            pc.invert(pc.match_substring(binary, b"\0")),
        )
        found &= fits.to_numpy(zero_copy_only=False)
        return np.where(found, self.positions[at], -1)


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
