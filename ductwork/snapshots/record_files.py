"""The names of the record files a serving worker writes beside a snapshot (one per numbered
list, ``serve.record_file``).

The read API writes them, but the core names them: pruning removes them with their snapshot and
erasure reaches them, and neither may import the read API (the layers run one way).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ductwork.streams.registry import numbered_lists

# A serving worker writes each large list's records into a hidden file beside the snapshot it
# serves (``serve.record_file``): ``.records-<hash>``, first as ``.records-<random>.partial``
# under ``.records.lock``. Named here, so that ``prune`` removes them with their snapshots.
RECORDS_PREFIX = ".records-"


RECORDS_PARTIAL = ".partial"


RECORDS_LOCK = ".records.lock"


def record_file_name(snapshot: Path, table: str) -> str:
    """The name of the record file of ``table`` (a numbered list) of the snapshot file
    ``snapshot``, beside it: named after the file's identity, so a snapshot copied or changed
    in place gets a file of its own."""
    if table not in numbered_lists():
        # prune keeps the record files of a snapshot by these names: none other may be made.
        raise ValueError(f"{table} is not a numbered list: it has no record file")
    info = snapshot.stat()
    identity = f"{snapshot.name}|{info.st_ino}|{info.st_mtime_ns}|{info.st_size}|{table}"
    return RECORDS_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:32]


def record_file_names(snapshot: Path) -> set[str]:
    """The names of every record file the snapshot file ``snapshot`` may have (one per
    numbered list)."""
    return {record_file_name(snapshot, table) for table in numbered_lists()}
