"""API keys of the read API: random, high-entropy, stored only as SHA-256 hashes.

A key is 32 random bytes, so a fast hash is enough: there is nothing to brute-force. Lookups
go by hash and the final comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ductwork.contract.encoding import dumps, loads
from ductwork.contract.paths import Family

# The scope a key needs for each path family.
SCOPE_OF: dict[Family, str] = {
    Family.PRODUCTS: "catalog",
    Family.WAREHOUSE: "warehouse",
    Family.CRM: "crm",
    Family.INTERNAL: "internal",
}
SCOPES: tuple[str, ...] = tuple(SCOPE_OF.values())
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
class KeyStore:
    """The key file under DUCTWORK_HOME; re-read when it changes on disk."""

    path: Path
    _by_hash: dict[str, ApiKey] = field(default_factory=dict)
    _stamp: tuple[int, int] | None = None

    def entries(self) -> list[ApiKey]:
        """Every key ever issued, revoked ones included."""
        self._refresh()
        return list(self._by_hash.values())

    def create(self, name: str, scopes: list[str] | None = None) -> str:
        """Issue a key; returns the key itself, which is not stored anywhere."""
        unknown = sorted(set(scopes or []) - set(SCOPES))
        if unknown:
            raise ValueError(f"unknown scope(s) {unknown}; choose from {list(SCOPES)}")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = ApiKey(
            name=name,
            key_hash=hash_key(key),
            scopes=sorted(scopes or SCOPES),
            created_at=datetime.now(UTC).isoformat(),
        )
        self._refresh()
        self._by_hash[entry.key_hash] = entry
        self._save()
        return key

    def revoke(self, name: str) -> int:
        """Revoke every active key of that name; returns how many."""
        self._refresh()
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

    def _refresh(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._by_hash, self._stamp = {}, None
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            entries = [ApiKey(**item) for item in loads(self.path.read_bytes())["keys"]]
            self._by_hash = {entry.key_hash: entry for entry in entries}
            self._stamp = stamp

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:6]}")
        tmp.write_bytes(dumps({"keys": [asdict(entry) for entry in self._by_hash.values()]}))
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
        self._stamp = None
