"""A per-client sliding-window limit (for the key-less indoor-models path)."""

from __future__ import annotations

import math
import threading
import time
from collections import deque


class SlidingWindowLimit:
    """At most ``limit`` requests per client within any ``window_s`` seconds."""

    def __init__(self, limit: int, window_s: float = 1.0, max_clients: int = 10_000) -> None:
        self._limit = limit
        self._window = window_s
        self._max_clients = max_clients
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, client: str) -> int | None:
        """None if allowed (and counted), else the seconds to wait (for Retry-After)."""
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > self._max_clients:
                self._seen.clear()  # bounded memory under a flood of distinct addresses
            stamps = self._seen.setdefault(client, deque())
            while stamps and now - stamps[0] >= self._window:
                stamps.popleft()
            if len(stamps) >= self._limit:
                return max(1, math.ceil(self._window - (now - stamps[0])))
            stamps.append(now)
            return None
