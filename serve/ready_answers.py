"""What the short path learned about a list page of the current snapshot, kept for the next
request of the same path and query.

A list page is the same bytes for as long as its snapshot is served, yet the short path
(``serve/fast_answers.py``) would gather its records, wrap them in the envelope and hash the
whole for its ETag on every request: for a page of a hundred products that is most of the
request's cost. Each serving state keeps a ``ReadyAnswers`` of its own, so nothing outlives the
snapshot it was read from. An entry holds the ETag and, for a page built from records held in
memory, the body too; a page sliced from a record file is sliced again (cheaply) rather than
copied here. The least recently used entries are dropped beyond the byte limit. A SKU lookup is
not kept: making it again costs less than keeping every SKU would (and than missing them all,
were there more than the limit holds). Only products and digital assets are kept: no personal
data, so nothing here needs to follow an erasure.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from serve.gzip_cache import AnswerCache

# An entry's share of the ordered dictionary, its tuples and its ETag, over its key's and body's
# own sizes; generous on purpose.
ENTRY_OVERHEAD_BYTES = 320
LIMIT_BYTES = 16 << 20  # per worker and snapshot


class Ready(NamedTuple):
    """An answer's body (None: read it again), its ETag and its Last-Modified (a lookup's,
    made ready for its one request)."""

    body: bytes | None
    etag: bytes
    modified: tuple[float, bytes] | None = None


Key = tuple[str, bytes]  # the request's path and raw query


class ReadyAnswers(AnswerCache):
    """Ready answers by (path, query), least recently used dropped first beyond
    ``limit_bytes``. Used from the event loop only."""

    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        super().__init__(limit_bytes)

    def size_of(self, key: Key, answer: Ready) -> int:
        """The memory an entry holds: its key's, its body's (when kept) and bookkeeping."""
        path, query = key
        size = ENTRY_OVERHEAD_BYTES + sys.getsizeof(path) + sys.getsizeof(query)
        return size if answer.body is None else size + sys.getsizeof(answer.body)
