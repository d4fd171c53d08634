"""The audit log of erasures: one JSON line per ``ductwork forget``, in the data folder.

A line names the stream, a keyed hash of each key (HMAC-SHA256 with a random secret kept in
the data folder, never the key: a key can itself be personal data), the time (UTC), the
reason and what was removed. Never a key, never a record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ductwork import file_modes

AUDIT_LOG = "erasures.jsonl"
SECRET = ".erasure-secret"  # the HMAC key, 0600, made on first use
SECRET_BYTES = 32


def audit_path(home: Path) -> Path:
    """The audit log of the data folder ``home``."""
    return home / AUDIT_LOG


def _secret(home: Path) -> bytes:
    """The data folder's hashing secret, created (0600, never replaced) on first use."""
    path = home / SECRET
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    file_modes.current().make_private_dir(home)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made meanwhile by another process: use theirs
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secrets.token_hex(SECRET_BYTES).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    file_modes.fsync(home)
    return bytes.fromhex(path.read_text(encoding="ascii").strip())


def keyed_hashes(home: Path, keys: list[str]) -> list[str]:
    """Each key's HMAC-SHA256 under the data folder's secret, as hex, in order."""
    secret = _secret(home)
    return [hmac.new(secret, key.encode(), hashlib.sha256).hexdigest() for key in keys]


def entry(
    erasure_id: str,
    stream: str,
    hashes: list[str],
    reason: str,
    removed: Mapping[str, int],
    copies: Mapping[str, int],
    suppressed: bool,
) -> dict[str, Any]:
    """An audit line's content: no key, no record."""
    return {
        "erasure": erasure_id,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stream": stream,
        "key_hashes": hashes,
        "reason": reason,
        "suppressed": suppressed,
        "rows_removed": dict(removed),
        "copies_removed": dict(copies),
    }


def entries(home: Path) -> list[dict[str, Any]]:
    """The audit log's lines, oldest first; a line that is not one JSON object (the torn end
    of a write a kill cut short, see ``append``) is skipped."""
    try:
        lines = audit_path(home).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found: list[dict[str, Any]] = []
    for line in lines:
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            found.append(parsed)
    return found


def logged(home: Path, erasure_id: str) -> bool:
    """Whether the audit log already has the line of erasure ``erasure_id`` (a run that
    finished it and was stopped before it said so)."""
    return any(line.get("erasure") == erasure_id for line in entries(home))


def append(home: Path, line: Mapping[str, Any]) -> None:
    """Append one line to the audit log (created with the data folder's file mode), flushed.

    The caller holds the warehouse's lease, so no other erasure writes meanwhile. A process
    killed inside its write can leave part of its line (Linux stops a write to a file between
    pages for a fatal signal); that erasure is then not logged and its rerun logs it, so the
    torn tail is cut first and the log stays one JSON object per line."""
    path = audit_path(home)
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
    fd = os.open(path, flags, file_modes.current().file_mode)
    try:
        file_modes.current().secure_descriptor(fd)
        _cut_torn_tail(fd)
        os.write(fd, (json.dumps(dict(line), sort_keys=True) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _cut_torn_tail(fd: int) -> None:
    """Truncate the file ``fd`` after its last newline when it does not end with one."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    whole = os.pread(fd, size, 0)
    os.ftruncate(fd, whole.rfind(b"\n") + 1)
