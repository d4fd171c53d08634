"""The C heap of a process that syncs, kept from holding on to memory it has freed.

glibc serves a large allocation from its heap or, above a threshold, by mapping it on its own,
and raises that threshold each time a mapped block is freed (up to 32 MiB). After the first
pages of a list, every page body and Arrow buffer of a few hundred KiB then comes from the
heap, which keeps the memory once it is freed, in pieces too scattered to hand back, and a
sync's peak grows by it. With the threshold fixed at glibc's own starting value, such blocks are
mapped and unmapped whole. Two arenas, rather than up to eight per core, keep less freed memory
aside per thread that allocates. ``bench/RESULTS.md`` has the peaks.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# mallopt's parameters, from glibc's malloc.h.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's default, held there rather than raised
ARENAS = 2


def keep_heap_compact() -> bool:
    """Fix glibc's mapping threshold and bound its arenas for the rest of the process;
    whether the C library took both (not glibc: nothing changes)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process already runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    taken = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    taken = mallopt(M_ARENA_MAX, ARENAS) == 1 and taken
    if not taken:
        log.debug("the C library did not take the heap settings; left as they were")
    return taken
