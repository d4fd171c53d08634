"""A gzip body that inflates far beyond what it weighs on the wire (the ``gzip_bomb`` switch).

The body is a run of gzip members (RFC 1952 allows any number, and decoders join them): a
gigabyte of spaces, then the real answer. Whitespace before a JSON value is still JSON, so a
client without a cap on inflated bytes would take the answer as valid after holding a
gigabyte; the compressed body is about a megabyte.
"""

from __future__ import annotations

import gzip
from functools import cache

MEMBER_BYTES = 16 << 20  # inflated size of one member of padding
MEMBERS = 64  # 64 x 16 MiB = 1 GiB of padding
INFLATED_PADDING = MEMBER_BYTES * MEMBERS


@cache
def _padding() -> bytes:
    # Built once: a member of 16 MiB of spaces compresses to about 16 KB in some 60 ms.
    return gzip.compress(b" " * MEMBER_BYTES, compresslevel=9, mtime=0) * MEMBERS


def bomb(body: bytes) -> bytes:
    """``body`` gzip-compressed behind ``INFLATED_PADDING`` bytes of compressed whitespace."""
    return _padding() + gzip.compress(body, mtime=0)
