"""What a worker keeps of earlier publishes, dropped after an erasure.

``ductwork forget`` removes every copy of a forgotten record but the current snapshot (which no
longer holds it), then rewrites the folder's erasure marker (``ductwork.erasure.local_files``).
A worker's watcher looks at the marker as it looks at the pointer; a new one grows the
generation below, and every keeper of answers or states of earlier publishes (the gzip and feed
page caches, ``serve.gzip_cache.AnswerCache``; the past states, ``serve.past_states``) drops
what it holds when it next finds the generation changed, before answering anything from it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ductwork.erasure.local_files import MARKER


class Erasures:
    """The erasures marked in a snapshots folder since the worker started: ``generation``
    grows by one with each new marker seen."""

    def __init__(self, snapshots_dir: Path) -> None:
        self._path = snapshots_dir / MARKER
        self._lock = threading.Lock()
        self._seen = self._identity()
        self.generation = 0

    def look(self) -> bool:
        """One stat of the marker: whether it was rewritten since the last look (then the
        generation grew)."""
        found = self._identity()
        with self._lock:
            if found == self._seen:
                return False
            self._seen = found
            self.generation += 1
            return True

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            found = self._path.stat()
        except FileNotFoundError:
            return None
        return found.st_ino, found.st_mtime_ns, found.st_size
