"""A change file's entries kept compressed as well, in chunks that a page's gzip body is
assembled from.

A feed page is a slice of a change file's entries inside its JSON envelope. Compressing a page
of 1000 entries (400 kB) costs its first request about half a millisecond; most of that work can
be done once, at publish. Every ``CHUNK_ROWS`` rows of a change file also hold those rows'
entries as raw deflate, compressed on their own (no reference to another chunk) and flushed to
a byte boundary, so that chunks laid one after another are valid deflate blocks. A page's gzip
body is then: the gzip header, the page's bytes up to its first whole chunk compressed now, the
whole chunks the page holds (all but any chunk holding its last entry, whose comma the page
drops), the rest compressed now, and the trailer (the CRC-32 and length of the whole body). Its
size is within a few percent of compressing the page whole.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from isal import isal_zlib

CHUNK_ROWS = 64
LEVEL = 1  # ISA-L's level 1, as the read API's gzip layer compresses
RAW_DEFLATE = -isal_zlib.MAX_WBITS
# A gzip member's header: deflate, no flags, no time, no extra flags, unknown system.
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
Piece = bytes | memoryview  # a part of a body, read where it lies


def deflated_chunks(entries: pa.Array) -> pa.Array:
    """Per row of ``entries`` (a large binary array): at every ``CHUNK_ROWS``-th row, the
    chunk's rows (that row and the next ones) one after another, as raw deflate on its own and
    flushed to a byte boundary; null at the other rows."""
    found: list[bytes | None] = [None] * len(entries)
    if not found:
        return pa.array(found, pa.large_binary())
    offsets = value_offsets(entries)
    data = memoryview(entries.buffers()[2]).cast("B")
    for start in range(0, len(entries), CHUNK_ROWS):
        end = min(start + CHUNK_ROWS, len(entries))
        compressor = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, RAW_DEFLATE)
        chunk = data[offsets[start] : offsets[end]]
        found[start] = compressor.compress(chunk) + compressor.flush(isal_zlib.Z_SYNC_FLUSH)
    return pa.array(found, pa.large_binary())


def value_offsets(entries: pa.Array) -> np.ndarray:
    """Where each value of a large binary array starts in its data, and where the last ends
    (``len(entries) + 1`` offsets)."""
    held = entries.buffers()[1]
    if held is None:  # an empty array may have no offsets at all
        return np.zeros(1, np.int64)
    offsets = np.frombuffer(held, dtype=np.int64)
    return offsets[entries.offset : entries.offset + len(entries) + 1]


def gzip_around(
    pieces: Sequence[Piece], middle_at: int, middle_end: int, middle: Sequence[bytes]
) -> bytes:
    """The body made of ``pieces`` (one after another) as one gzip stream in which its bytes
    ``[middle_at, middle_end)`` are written as the deflate blocks ``middle`` (chunks of
    ``deflated_chunks``, one after another, that inflate to exactly those bytes) and the rest
    is compressed now. The pieces are read where they lie: the body is never joined."""
    front = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, RAW_DEFLATE)
    back = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, RAW_DEFLATE)
    out = [HEADER]
    out += [front.compress(part) for part in _within(pieces, 0, middle_at)]
    out += [front.flush(isal_zlib.Z_SYNC_FLUSH), *middle]
    out += [back.compress(part) for part in _within(pieces, middle_end, None)]
    out.append(back.flush())
    crc, length = 0, 0
    for piece in pieces:
        crc, length = isal_zlib.crc32(piece, crc), length + len(piece)
    out.append(struct.pack("<II", crc, length & 0xFFFFFFFF))
    return b"".join(out)


def _within(pieces: Sequence[Piece], start: int, end: int | None) -> list[memoryview]:
    """Views of the bytes ``[start, end)`` of the body made of ``pieces`` (None: to its end)."""
    found, at = [], 0
    for piece in pieces:
        view = memoryview(piece).cast("B")
        low, high = max(start - at, 0), len(view) if end is None else min(end - at, len(view))
        if low < high:
            found.append(view[low:high])
        at += len(view)
    return found
