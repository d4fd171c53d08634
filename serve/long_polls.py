"""How many long polls (``wait`` on the changes feed) a worker holds at once.

A waiting request costs one unit of its key's limit however long it waits, and holds a
connection (a file descriptor) and a future meanwhile; without a cap one key could hold tens of
thousands of them per worker. A worker holds at most ``per_worker`` waiting requests, and at
most ``per_key`` of one key. A request past either is not refused: it is answered at once, as
if it had asked for no wait, and other routes are never held up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Gauge


class LongPolls:
    """The waiting requests of one worker, in all and per key (by the key's hash)."""

    def __init__(
        self, per_worker: int, per_key: int, registry: CollectorRegistry | None = None
    ) -> None:
        """``registry`` takes the gauge; None in prometheus multiprocess mode."""
        self.per_worker = per_worker
        self.per_key = per_key
        self._lock = threading.Lock()
        self._held = 0
        self._by_key: dict[str, int] = {}
        self.waiting = Gauge(
            "ductwork_feed_waiting",
            "Changes-feed requests waiting for a newer snapshot (long polls)",
            registry=registry,
            multiprocess_mode="livesum",
        )

    @contextmanager
    def slot(self, key_hash: str) -> Iterator[bool]:
        """Whether this request may wait (a slot held for the block), or must answer now."""
        with self._lock:
            held_by_key = self._by_key.get(key_hash, 0)
            admitted = self._held < self.per_worker and held_by_key < self.per_key
            if admitted:
                self._held += 1
                self._by_key[key_hash] = held_by_key + 1
        if not admitted:
            yield False
            return
        self.waiting.inc()
        try:
            yield True
        finally:
            self.waiting.dec()
            with self._lock:
                self._held -= 1
                left = self._by_key[key_hash] - 1
                if left:
                    self._by_key[key_hash] = left
                else:
                    del self._by_key[key_hash]
