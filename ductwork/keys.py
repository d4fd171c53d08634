"""API keys of the read API: random, high-entropy, stored only as SHA-256 hashes.

A key is 32 random bytes, so a fast hash is enough: there is nothing to brute-force. Lookups
go by hash and the final comparison is constant-time.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import secrets
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ductwork import file_modes
from ductwork.contract.encoding import dumps, loads
from ductwork.contract.paths import Family

# The scope a key needs for each path family.
SCOPE_OF: dict[Family, str] = {
    Family.PRODUCTS: "catalog",
    Family.WAREHOUSE: "warehouse",
    Family.CRM: "crm",
    Family.INTERNAL: "internal",
}
# What a key gets by default (and by ``all``): the four data families.
SCOPES: tuple[str, ...] = tuple(SCOPE_OF.values())
# /metrics and the API's documents; granted only when asked for by name.
OPS_SCOPE = "ops"
GRANTABLE_SCOPES: tuple[str, ...] = (*SCOPES, OPS_SCOPE)
# The word that grants every data scope when a key is created, said out loud.
ALL_SCOPES = "all"
KEY_PREFIX = "dwk_"


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

    def entries(self) -> list[ApiKey]:
        """Every key ever issued, revoked ones included."""
        self._refresh()
        return list(self._by_hash.values())

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
        """The active key entry matching ``key``, or None."""
        self._refresh()
        digest = hash_key(key)
        entry = self._by_hash.get(digest)
        if entry is None or not entry.active or not hmac.compare_digest(entry.key_hash, digest):
            return None
        return entry

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
            self._refresh()
            yield
        finally:
            os.close(fd)  # closing the descriptor drops its lock

    def _refresh(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._by_hash, self._stamp = {}, None
            return
        # Every save replaces the file, so its inode changes too, whatever the clock says.
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            entries = [ApiKey(**item) for item in loads(self.path.read_bytes())["keys"]]
            self._by_hash = {entry.key_hash: entry for entry in entries}
            self._stamp = stamp

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


def granted_scopes(scopes: Sequence[str]) -> list[str]:
    """The scopes a new key gets: those named (``all`` stands for every data scope), sorted.
    Raises ValueError for none at all or an unknown one."""
    if not scopes:
        raise ValueError(
            f"a key needs at least one scope: {', '.join(GRANTABLE_SCOPES)} or {ALL_SCOPES}"
        )
    unknown = sorted(set(scopes) - set(GRANTABLE_SCOPES) - {ALL_SCOPES})
    if unknown:
        raise ValueError(f"unknown scope(s) {unknown}; choose from {list(GRANTABLE_SCOPES)}")
    named = set(scopes) - {ALL_SCOPES}
    return sorted(named | set(SCOPES) if ALL_SCOPES in scopes else named)
