"""A body held in pieces where they already lie, joined only when sent as it is.

A feed page sliced from a change file is its head, its entries as the mapped file holds them,
and its close. Joining them copies some 400 kB into memory the worker has not touched yet: a
page fault every 4 KiB, which cost a page's first request more than slicing it. Sent
compressed (``ChangeFile.gzip_of`` reads the pieces in place), such a page is never joined;
its ETag is hashed over the pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ductwork.history.gzip_chunks import Piece
from serve.validators import pieces_etag


@dataclass(frozen=True)
class PiecedBody:
    """A body as ``pieces``, one after another; ``gzipped`` gives its gzip form without
    joining them, when it can be made that way."""

    pieces: tuple[Piece, ...]
    gzipped: Callable[[], bytes] | None = None

    def __len__(self) -> int:
        return sum(len(piece) for piece in self.pieces)

    def joined(self) -> bytes:
        """The body's bytes."""
        if len(self.pieces) == 1 and isinstance(self.pieces[0], bytes):
            return self.pieces[0]
        return b"".join(self.pieces)

    def etag(self) -> bytes:
        """The body's ``content_etag``, hashed piece by piece."""
        return pieces_etag(self.pieces)


def bytes_of(body: bytes | PiecedBody) -> bytes:
    """The bytes of a body, whole or in pieces."""
    return body if isinstance(body, bytes) else body.joined()
