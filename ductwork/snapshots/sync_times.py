"""When each stream last synced successfully, kept beside the snapshot pointer.

A publish, whether it copied a new snapshot or only confirmed the current one, writes ``SYNCED``
into the snapshots folder (and beside ``CURRENT`` in the object store, which replicas copy):
``{"streams": {name: date-time}}``, each stream's time being when every one of its steps had
last finished successfully. A snapshot cannot hold it: a sync that changed nothing publishes no
new snapshot, yet it synced. The read API dates its answers with it (``X-Synced-At``) and, when
told a maximum age, refuses to answer from data older than that.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from ductwork import file_modes
from ductwork.contract.encoding import format_datetime, parse_datetime

SYNCED = "SYNCED"
MAX_BYTES = 1 << 20  # a few hundred bytes per stream; anything larger is not this file
log = logging.getLogger("ductwork")


def encode(times: Mapping[str, datetime]) -> bytes:
    """The file's bytes for ``times`` (stream name -> when it last synced)."""
    streams = {name: format_datetime(moment) for name, moment in sorted(times.items())}
    return json.dumps({"streams": streams}, indent=1).encode()


def decode(raw: bytes) -> dict[str, datetime]:
    """The times a file holds; ValueError when it is not one this module wrote."""
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{SYNCED} is larger than {MAX_BYTES} bytes")
    try:
        streams = json.loads(raw)["streams"]
        return {str(name): parse_datetime(text) for name, text in streams.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{SYNCED} holds no stream times: {exc}") from None


def write(snapshots_dir: Path, times: Mapping[str, datetime]) -> None:
    """Replace the folder's ``SYNCED`` at once."""
    file_modes.write_atomically(snapshots_dir / SYNCED, encode(times).decode())


def read(snapshots_dir: Path) -> dict[str, datetime]:
    """The folder's stream times; empty when there are none yet, or when the file is not
    readable as such (logged: the answers then go undated rather than wrongly dated)."""
    try:
        return decode((snapshots_dir / SYNCED).read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        log.warning("%s: %s", snapshots_dir / SYNCED, exc)
        return {}


class FolderSyncTimes:
    """The stream times of one snapshots folder, read again when ``SYNCED`` is rewritten."""

    def __init__(self, snapshots_dir: Path) -> None:
        self._dir = snapshots_dir
        self._seen: float | None = None
        self.times: dict[str, float] = {}  # stream name -> epoch seconds

    def refresh(self) -> None:
        """Read the times again if the file was rewritten since (one ``stat`` otherwise)."""
        modified = modified_at(self._dir)
        if modified != self._seen:
            self._seen = modified
            self.times = {name: moment.timestamp() for name, moment in read(self._dir).items()}


def modified_at(snapshots_dir: Path) -> float | None:
    """When the folder's ``SYNCED`` was last written (epoch seconds), None without one."""
    try:
        return (snapshots_dir / SYNCED).stat().st_mtime
    except FileNotFoundError:
        return None
