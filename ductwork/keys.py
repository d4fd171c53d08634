"""API keys of the read API: random, high-entropy, stored only as SHA-256 hashes.

A key is 32 random bytes, so a fast hash is enough: there is nothing to brute-force. Lookups
go by hash and the final comparison is constant-time.

The read API re-reads the key file when it changes on disk: a request sent after a revocation
returned is refused. A server bound to its event loop (``KeyFile.check_per_turn``) looks at the
file once per turn of that loop rather than once per request: every request a turn answers
arrived before the turn began, so a look taken during the turn is no older than any of them.
A version it cannot read (not JSON,
not a key file, unreadable) does not stop it: it keeps the keys it last read, logs the fault
once for that version of the file, and reports it (``KeyFile.fault``) until a readable version
replaces it. The commands that change the file refuse to write over a file they cannot read.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import threading
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ductwork import file_modes
from ductwork.contract.encoding import dumps, loads
from ductwork.contract.paths import Family
from ductwork.streams.registry import STREAMS, stream_serving

# The scope a key needs for each path family.
SCOPE_OF: dict[Family, str] = {
    Family.PRODUCTS: "catalog",
    Family.DATA_WAREHOUSE: "warehouse",
    Family.CRM: "crm",
    Family.INTERNAL: "internal",
}
# What a key gets by default (and by ``all``): the four data families.
SCOPES: tuple[str, ...] = tuple(SCOPE_OF.values())
# /metrics and the OpenAPI document (with its pages); granted only when asked for by name.
OPS_SCOPE = "ops"
GRANTABLE_SCOPES: tuple[str, ...] = (*SCOPES, OPS_SCOPE)
# The word that grants every data scope when a key is created, said out loud.
ALL_SCOPES = "all"
# A stream's scope is ``stream:<its name>``: its spec paths, its changes feed and its past,
# and nothing else of its family (one stream of a family may hold personal data, another not).
STREAM_SCOPE_PREFIX = "stream:"
KEY_PREFIX = "dwk_"
# The members of a key record and the types each may hold.
_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "key_hash": (str,),
    "scopes": (list,),
    "created_at": (str,),
    "revoked_at": (str, type(None)),
}

log = logging.getLogger("ductwork.keys")


class KeyFileError(ValueError):
    """The key file cannot be read as a key file; the message says why (never its content)."""


@dataclass(frozen=True)
class KeyFileFault:
    """Why the key file on disk is not the one in use, since when, and what is used instead."""

    reason: str
    since: datetime
    keys_read_at: datetime | None  # when the keys still in use were read; None: no keys

    def describe(self) -> str:
        """One line for an operator: the fault and what is served meanwhile."""
        served = (
            "no keys are accepted"
            if self.keys_read_at is None
            else f"the keys read at {self.keys_read_at.isoformat(timespec='seconds')} are used"
        )
        since = self.since.isoformat(timespec="seconds")
        return f"the key file is {self.reason} (since {since}); {served}"


@dataclass
class ApiKey:
    """One issued key (its hash, never the key itself)."""

    name: str
    key_hash: str
    scopes: list[str]
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class KeyFile:
    """The key file; re-read when it changes on disk.

    ``create`` and ``revoke`` hold an exclusive lock on a file beside it while they read,
    change and rewrite it, so concurrent writers (two operators, two hosts on a shared volume)
    never overwrite each other's change. Each rewrite is flushed to disk, file and folder,
    before it returns: a revocation reported done survives a crash.
    """

    path: Path
    _by_hash: dict[str, ApiKey] = field(default_factory=dict)
    _stamp: tuple[int, int, int] | None = None
    _read_at: datetime | None = None
    _fault: KeyFileFault | None = None
    # The loop (and its thread) whose turns bound how often a request looks at the file.
    _loop: asyncio.AbstractEventLoop | None = None
    _loop_thread: int | None = None
    _looked_this_turn: bool = False

    def check_per_turn(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Look at the file at most once per turn of ``loop`` when verifying keys in its thread
        (None: on every verification, as anywhere else)."""
        self._loop, self._looked_this_turn = loop, False
        self._loop_thread = threading.get_ident() if loop is not None else None

    def entries(self) -> list[ApiKey]:
        """Every key ever issued, revoked ones included; KeyFileError if the file is unreadable."""
        self._refresh(strict=True)
        return list(self._by_hash.values())

    @property
    def fault(self) -> KeyFileFault | None:
        """Why the key file on disk is not the one in use (looked at now), or None."""
        self._refresh(strict=False)
        return self._fault

    def create(self, name: str, scopes: Sequence[str]) -> str:
        """Issue a key with ``scopes`` (``all``: every data scope); returns the key itself,
        which is not stored anywhere. An empty list is refused."""
        granted = granted_scopes(scopes)
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = ApiKey(
            name=name,
            key_hash=hash_key(key),
            scopes=granted,
            created_at=datetime.now(UTC).isoformat(),
        )
        with self._changing():
            self._by_hash[entry.key_hash] = entry
            self._save()
        return key

    def revoke(self, name: str) -> int:
        """Revoke every active key of that name; returns how many."""
        with self._changing():
            revoked = 0
            for entry in self._by_hash.values():
                if entry.name == name and entry.active:
                    entry.revoked_at = datetime.now(UTC).isoformat()
                    revoked += 1
            if revoked:
                self._save()
        return revoked

    def verify(self, key: str) -> ApiKey | None:
        """The active key entry matching ``key``, or None; from the keys last read when the
        file on disk cannot be read."""
        self._look_for_request()
        digest = hash_key(key)
        entry = self._by_hash.get(digest)
        if entry is None or not entry.active or not hmac.compare_digest(entry.key_hash, digest):
            return None
        return entry

    def _look_for_request(self) -> None:
        """Re-read the file if it changed: once per turn of the bound loop, in its thread (a
        stat is a system call, dearer than the rest of a key's check)."""
        if self._loop is None or threading.get_ident() != self._loop_thread:
            self._refresh(strict=False)
            return
        if self._looked_this_turn:
            return
        self._refresh(strict=False)
        self._looked_this_turn = True
        # Runs before any request whose bytes arrive after this turn is answered.
        self._loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._looked_this_turn = False

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """The lock that serialises writers, with the file freshly read under it."""
        modes = file_modes.current()
        modes.make_private_dir(self.path.parent)
        lock = self.path.with_name(f".{self.path.name}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, modes.file_mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._stamp = None  # whatever was read before the lock may be stale
            self._refresh(strict=True)
            yield
        finally:
            os.close(fd)  # closing the descriptor drops its lock

    def _refresh(self, strict: bool) -> None:
        """Read the file again if it changed. A version that cannot be read raises
        KeyFileError when ``strict``; otherwise the keys last read stay in use and the fault
        is logged once for that version."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._by_hash, self._stamp, self._fault = {}, None, None
            return
        # Every save replaces the file, so its inode changes too, whatever the clock says.
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp and (self._fault is None or not strict):
            return
        try:
            entries = _read_key_file(self.path)
        except KeyFileError as exc:
            if strict:
                raise
            self._stamp = stamp  # not read again until it changes
            since = datetime.now(UTC) if self._fault is None else self._fault.since
            self._fault = KeyFileFault(str(exc), since, self._read_at)
            log.warning("%s: %s", self.path, self._fault.describe())
            return
        if self._fault is not None:
            log.warning("%s: the key file can be read again; its keys are used", self.path)
        self._by_hash = {entry.key_hash: entry for entry in entries}
        self._stamp, self._read_at, self._fault = stamp, datetime.now(UTC), None

    def _save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:6]}")
        content = dumps({"keys": [asdict(entry) for entry in self._by_hash.values()]})
        try:
            file_modes.current().write_private(tmp, content)
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        file_modes.fsync(self.path.parent)
        self._stamp = None


def _read_key_file(path: Path) -> list[ApiKey]:
    """The key records of the file; KeyFileError naming what is wrong with it."""
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"unreadable ({type(exc).__name__})") from None
    try:
        document = loads(content)
    except ValueError:
        raise KeyFileError("not valid JSON") from None
    records = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(records, list):
        raise KeyFileError('not a key file (no "keys" list)')
    entries = []
    for number, record in enumerate(records, start=1):
        if (
            not isinstance(record, dict)
            or set(record) - set(_RECORD_TYPES)
            or any(not isinstance(record.get(k), t) for k, t in _RECORD_TYPES.items())
            or not all(isinstance(scope, str) for scope in record["scopes"])
        ):
            raise KeyFileError(f"not a key file (record {number} is malformed)")
        entries.append(ApiKey(**record))
    return entries


def stream_scope(stream: str) -> str:
    """The scope that grants the stream named ``stream`` alone."""
    return STREAM_SCOPE_PREFIX + stream


# One scope per stream of the registry.
STREAM_SCOPES: tuple[str, ...] = tuple(stream_scope(stream.name) for stream in STREAMS)


def grants(scopes: Collection[str], family: Family, path: str) -> bool:
    """Whether a key holding ``scopes`` may read ``path``, a spec path of ``family``: by the
    family's scope, or by the scope of the stream the path draws on (a path of no stream, such
    as the image sync's trigger, only by the family's)."""
    if SCOPE_OF[family] in scopes:  # checked first: the common case needs no stream
        return True
    stream = stream_serving(path)
    return stream is not None and stream_scope(stream.name) in scopes


def lacking(family: Family, path: str) -> str:
    """The message of a 403 for ``path``: the scopes that would grant it."""
    needed = repr(SCOPE_OF[family])
    stream = stream_serving(path)
    if stream is not None:
        needed += f" or {stream_scope(stream.name)!r}"
    return f"This key lacks the {needed} scope"


def granted_scopes(scopes: Sequence[str]) -> list[str]:
    """The scopes a new key gets: those named (``all`` stands for every data scope), sorted.
    Raises ValueError, with a one-line message, for none at all or an unknown one (a stream
    scope must name a stream of the registry)."""
    choices = f"{', '.join(GRANTABLE_SCOPES)}, {ALL_SCOPES} or {STREAM_SCOPE_PREFIX}<stream>"
    if not scopes:
        raise ValueError(f"a key needs at least one scope: {choices}")
    unknown = sorted(set(scopes) - set(GRANTABLE_SCOPES) - set(STREAM_SCOPES) - {ALL_SCOPES})
    if unknown:
        streams = ", ".join(stream.name for stream in STREAMS)
        raise ValueError(
            f"unknown scope(s) {', '.join(map(repr, unknown))}; choose from {choices} "
            f"(streams: {streams})"
        )
    named = set(scopes) - {ALL_SCOPES}
    return sorted(named | set(SCOPES) if ALL_SCOPES in scopes else named)
