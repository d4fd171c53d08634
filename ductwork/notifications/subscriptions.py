"""Change-notification subscriptions, kept in a SQLite file of the data folder.

A subscription names the streams it follows, the URL its notifications are POSTed to and the
secret they are signed with. Its cursor is the last notification its subscriber acknowledged
with a 2xx: a publish (``cursor_seq``) and, within it, the last stream told (``cursor_stream``;
None when the whole publish was told, as when the subscription was added). A failing subscriber
keeps its cursor; it is retried after a back-off that doubles, and paused once it has failed
for longer than the give-up time. The sync's runs, the daemon's sensor and the CLI all write
here: SQLite's own locking keeps each change whole.

The file holds the signing secrets, so it and its folder get the data folder's modes
(``file_modes``: 0600 and 0700, or 0640 and 2750 with ``DUCTWORK_FILE_GROUP``) whatever the
process's file-creation mask; SQLite gives its side files (the rollback journal) the database
file's mode.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from ductwork import file_modes

SECRET_PREFIX = "whsec_"  # the Standard Webhooks form of a signing secret
SECRET_BYTES = 32
MAX_BACKOFF_S = 3600.0
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DATABASE_NAME = "subscriptions.sqlite"
BUSY_TIMEOUT_S = 30.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS subscriptions (
    name             TEXT PRIMARY KEY,
    id               TEXT NOT NULL,
    url              TEXT NOT NULL,
    streams          TEXT NOT NULL,
    secret           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    cursor_seq       INTEGER NOT NULL,
    cursor_stream    TEXT,
    failing_since    REAL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL,
    last_error       TEXT,
    paused_at        REAL
)
"""
COLUMNS = (
    "name, id, url, streams, secret, created_at, cursor_seq, cursor_stream, failing_since, "
    "attempts, next_attempt_at, last_error, paused_at"
)


class SubscriptionError(ValueError):
    """A subscription that cannot be added, found or changed as asked; the message says why."""


@dataclass(frozen=True)
class Subscription:
    """One subscription as stored. ``secret`` signs its notifications; never print it again."""

    name: str
    id: str
    url: str
    streams: tuple[str, ...]
    secret: str
    created_at: str
    cursor_seq: int
    cursor_stream: str | None
    failing_since: float | None
    attempts: int
    next_attempt_at: float | None
    last_error: str | None
    paused_at: float | None

    @property
    def paused(self) -> bool:
        """Whether deliveries are stopped until a replay resumes them."""
        return self.paused_at is not None

    def state(self) -> str:
        """``active``, ``failing since ...`` or ``paused since ...``, as ``list`` shows it."""
        if self.paused_at is not None:
            return f"paused since {_instant(self.paused_at)} ({self.last_error})"
        if self.failing_since is not None:
            retry = _instant(self.next_attempt_at or self.failing_since)
            return (
                f"failing since {_instant(self.failing_since)} ({self.last_error}; "
                f"{self.attempts} attempts, next at {retry})"
            )
        return "active"

    def due(self, now: float) -> bool:
        """Whether a delivery may be tried at ``now`` (not paused, back-off over)."""
        return not self.paused and (self.next_attempt_at is None or self.next_attempt_at <= now)


def new_secret() -> str:
    """A random signing secret in the Standard Webhooks form (``whsec_`` and base64)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def backoff_s(attempts: int, first_s: float) -> float:
    """The wait before the next try after ``attempts`` failures in a row: ``first_s``,
    doubling, at most an hour."""
    return min(first_s * 2 ** max(attempts - 1, 0), MAX_BACKOFF_S)


class SubscriptionStore:
    """The subscriptions of one data folder (``notifications/subscriptions.sqlite``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / DATABASE_NAME

    def exists(self) -> bool:
        """Whether any subscription was ever added (the file exists)."""
        return self.path.exists()

    def private_file(self, name: str) -> Path:
        """The path of the file ``name`` in the subscriptions' folder, the folder and the file
        made (if missing) and given the data folder's modes."""
        modes = file_modes.current()
        modes.make_private_dir(self.folder)
        modes.secure(self.folder)
        path = self.folder / name
        os.close(os.open(path, os.O_RDONLY | os.O_CREAT, modes.file_mode))
        modes.secure(path)
        return path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.private_file(DATABASE_NAME)  # an empty file is an empty SQLite database
        with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)) as con, con:
            con.execute(SCHEMA)
            yield con

    def add(self, name: str, url: str, streams: Sequence[str], cursor_seq: int) -> Subscription:
        """Store a new subscription told of every publish after ``cursor_seq``; its secret is
        in the result (and nowhere else it is shown)."""
        if not NAME_PATTERN.match(name):
            raise SubscriptionError(
                "a subscription's name is 1 to 64 letters, digits, '_', '.' or '-'"
            )
        check_url(url)
        if not streams:
            raise SubscriptionError("a subscription needs at least one --stream")
        created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        row = (name, uuid.uuid4().hex, url, json.dumps(sorted(set(streams))), new_secret(),
               created, cursor_seq, None, None, 0, None, None, None)  # fmt: skip
        with self._connect() as con:
            try:
                con.execute(f"INSERT INTO subscriptions ({COLUMNS}) VALUES ({_marks(13)})", row)
            except sqlite3.IntegrityError:
                raise SubscriptionError(f"a subscription named {name!r} exists") from None
        return _subscription(row)

    def all(self) -> list[Subscription]:
        """Every subscription, by name."""
        if not self.exists():
            return []
        with self._connect() as con:
            rows = con.execute(f"SELECT {COLUMNS} FROM subscriptions ORDER BY name").fetchall()
        return [_subscription(row) for row in rows]

    def get(self, name: str) -> Subscription:
        """The subscription named ``name``; SubscriptionError when there is none."""
        found = [sub for sub in self.all() if sub.name == name]
        if not found:
            raise SubscriptionError(f"no subscription named {name!r}")
        return found[0]

    def remove(self, name: str) -> None:
        """Forget a subscription; SubscriptionError when there is none."""
        self.get(name)
        with self._connect() as con:
            con.execute("DELETE FROM subscriptions WHERE name = ?", (name,))

    def rewind(self, name: str, cursor_seq: int) -> None:
        """Move the cursor back to the end of publish ``cursor_seq`` and resume the
        subscription (failures forgotten, not paused)."""
        self.get(name)
        with self._connect() as con:
            con.execute(
                "UPDATE subscriptions SET cursor_seq = ?, cursor_stream = NULL, "
                "failing_since = NULL, attempts = 0, next_attempt_at = NULL, last_error = NULL, "
                "paused_at = NULL WHERE name = ?",
                (cursor_seq, name),
            )

    def acknowledged(self, subscription: Subscription, seq: int, stream: str) -> None:
        """The subscriber answered 2xx to the notification of (``seq``, ``stream``): the cursor
        moves there and failures are forgotten. Ignored if the subscription was replaced."""
        with self._connect() as con:
            con.execute(
                "UPDATE subscriptions SET cursor_seq = ?, cursor_stream = ?, "
                "failing_since = NULL, attempts = 0, next_attempt_at = NULL, last_error = NULL "
                "WHERE name = ? AND id = ?",
                (seq, stream, subscription.name, subscription.id),
            )

    def failed(
        self, subscription: Subscription, error: str, now: float, first_backoff_s: float,
        give_up_s: float,
    ) -> Subscription:  # fmt: skip
        """Record a failed delivery at ``now``: the cursor stays, the next try waits a back-off,
        and a subscriber failing for ``give_up_s`` or longer is paused. Returns the new state."""
        with self._connect() as con:
            row = con.execute(
                f"SELECT {COLUMNS} FROM subscriptions WHERE name = ? AND id = ?",
                (subscription.name, subscription.id),
            ).fetchone()
            if row is None:  # removed meanwhile
                return subscription
            current = _subscription(row)
            since = current.failing_since if current.failing_since is not None else now
            attempts = current.attempts + 1
            paused = now if now - since >= give_up_s else None
            con.execute(
                "UPDATE subscriptions SET failing_since = ?, attempts = ?, next_attempt_at = ?, "
                "last_error = ?, paused_at = ? WHERE name = ? AND id = ?",
                (since, attempts, now + backoff_s(attempts, first_backoff_s), error, paused,
                 subscription.name, subscription.id),
            )  # fmt: skip
            row = con.execute(
                f"SELECT {COLUMNS} FROM subscriptions WHERE name = ?", (subscription.name,)
            ).fetchone()
        return _subscription(row)


def check_url(url: str) -> None:
    """A subscriber URL is http or https with a host; SubscriptionError otherwise (the message
    does not repeat the URL, which may carry a token)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not host:
        raise SubscriptionError("--url must be an http:// or https:// URL with a host")


def _subscription(row: Sequence[object]) -> Subscription:
    values = list(row)
    values[3] = tuple(json.loads(str(values[3])))
    return Subscription(*values)  # type: ignore[arg-type]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _instant(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
