"""``keep_heap_compact``: after it, a block of a few hundred KiB is mapped on its own even once a
larger mapped block was freed (glibc would otherwise have raised its threshold and served it
from the heap, which keeps it once freed). In a process of its own, so that this test's
settings do not outlive it; the whole sync's peak is measured by ``make bench``."""

from __future__ import annotations

import subprocess
import sys

from pipelines.processes import PROJECT_ROOT

PROBE = """
import ctypes, sys
from ductwork.heap import keep_heap_compact

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
if sys.argv[1] == "settled":
    assert keep_heap_compact()
libc.free(libc.malloc(4 << 20))  # a mapped block freed: glibc raises its threshold past it
mapped_before = libc.mallinfo2().hblks
block = libc.malloc(300 << 10)
print(libc.mallinfo2().hblks - mapped_before)
libc.free(block)
"""


def blocks_mapped_for_300_kib(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return int(done.stdout.strip())


def test_after_a_large_block_was_freed_a_300_kib_block_is_still_mapped_on_its_own() -> None:
    assert blocks_mapped_for_300_kib("default") == 0  # the raised threshold: from the heap
    assert blocks_mapped_for_300_kib("settled") == 1
