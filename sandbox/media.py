"""Product image bytes served under ``/media/``: a small, valid PNG per (SKU, number)."""

from __future__ import annotations

import hashlib
import struct
import zlib

SIDE = 8  # pixels


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def image_png(sku: str, number: int) -> bytes:
    """An 8x8 RGB PNG whose colours depend only on the SKU and the image number."""
    digest = hashlib.sha256(f"{sku}\x00{number}".encode()).digest()
    rows = b"".join(b"\x00" + digest[row * 3 : row * 3 + 3] * SIDE for row in range(SIDE))
    header = struct.pack(">IIBBBBB", SIDE, SIDE, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 9))
        + _chunk(b"IEND", b"")
    )
