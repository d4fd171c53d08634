"""The changes feed of a stream, read from a snapshot's history (no Dagster, no web framework):
the read API and ``ductwork changes`` both answer through it.

A walk is pinned to one publish (the one current at its first page): without ``since`` it lists
every record of that publish as an upsert; with ``since`` the net change of every key between
the token's publish and the pinned one, each key once in its final state. Entries are ordered by
(version, key), where a version is the publish that last changed the key (no earlier than the
oldest publish kept). Tokens are opaque, carry a check keyed with the mirror's name, and stay
valid for as long as the history they point into is kept.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import duckdb

from ductwork.contract.encoding import format_datetime
from ductwork.history.feed_entries import Change, Publish, RecordsNow, write_entries
from ductwork.history.feed_queries import (
    WHOLE_LISTING,
    feed_statement,
    named_parameters,
    publishes,
    records_of_keys,
    run_statement,
)
from warehouse_sql import section

if TYPE_CHECKING:  # a server's modules: numpy and Arrow stay out of a sync that reads no feed
    from ductwork.history.change_files import ChangeFile
    from ductwork.history.walk_listings import Listing, WalkListings

TOKEN_FORMAT = 1
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000


class ChangeFileSource(Protocol):
    """The change files a server has at hand (``ductwork.history.change_files``)."""

    def change_file(self, stream: str, version: str) -> ChangeFile | None:
        """The change file of ``stream`` written by the publish of ``version``, if any."""


class InvalidToken(ValueError):
    """A token this mirror did not issue, or a malformed one."""


class HistoryGone(LookupError):
    """The token points into history no longer kept; ``oldest`` is the oldest instant kept."""

    def __init__(self, oldest: datetime) -> None:
        super().__init__(f"history before {format_datetime(oldest)} is no longer kept")
        self.oldest = oldest


@dataclass(frozen=True)
class Position:
    """Where a walk stands: since which publish (None: the initial load), pinned to which
    publish (None: not yet pinned, the current one is taken), after which (version, key)."""

    stream: str
    since: int | None
    pin: int | None = None
    after: tuple[int, str] | None = None


@dataclass(frozen=True)
class FeedPage:
    """A page of a walk: its changes, the token that continues it, and the publish it is
    pinned to."""

    changes: Sequence[Change]
    next_token: str
    has_more: bool
    pinned: Publish
    # How the page writes its entries when it holds them as columns (``page_columns``).
    written: Callable[[bytes], bytes | memoryview] | None = None

    def entries(self, separator: bytes) -> bytes | memoryview:
        """The page's entries as the feed writes them (``Change.json_bytes``), joined by
        ``separator``."""
        if self.written is not None:
            return self.written(separator)
        return write_entries(self.changes, separator)


def horizons(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Each stream whose history is kept shorter than the rest, with the oldest publish it
    still keeps (none in a snapshot published before streams could be)."""
    try:
        rows = con.execute(section("history_feed", "horizons")).fetchall()
    except duckdb.CatalogException:
        return {}
    return dict(rows)


def kept_for(kept: Sequence[Publish], horizons: Mapping[str, int], stream: str) -> list[Publish]:
    """The publishes of ``kept`` that ``stream``'s history still holds: those from its horizon
    on. A token or an instant before them is answered as one before the whole history kept."""
    horizon = horizons.get(stream)
    return [publish for publish in kept if horizon is None or publish.seq >= horizon]


def mirror_id(con: duckdb.DuckDBPyConnection) -> str:
    """The mirror's name, with which its tokens are checked."""
    rows = con.execute(section("history", "mirror_id")).fetchall()
    return rows[0][0] if rows else ""


def encode_token(position: Position, mirror: str) -> str:
    """The opaque token of ``position``."""
    payload = {"f": TOKEN_FORMAT, "s": position.stream, "a": position.since, "p": position.pin}
    if position.after is not None:
        payload["k"] = list(position.after)
    body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
    text = body.decode().rstrip("=")
    return f"{text}.{_check(text, mirror)}"


def decode_token(token: str, mirror: str) -> Position:
    """The position a token names; InvalidToken if this mirror did not issue it."""
    text, dot, check = token.partition(".")
    if not dot or not text or _check(text, mirror) != check:
        raise InvalidToken("not a token of this mirror")
    try:
        payload = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if payload.get("f") != TOKEN_FORMAT:
            raise InvalidToken("a token of another format")
        after = payload.get("k")
        position = Position(
            stream=str(payload["s"]),
            since=_optional_int(payload.get("a")),
            pin=_optional_int(payload.get("p")),
            after=None if after is None else (int(after[0]), str(after[1])),
        )
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error) as exc:
        raise InvalidToken("a malformed token") from exc
    return position


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidToken("a malformed token")
    return value


def _check(text: str, mirror: str) -> str:
    return hashlib.blake2b(text.encode(), key=mirror.encode()[:64], digest_size=9).hexdigest()


def read_page(
    con: duckdb.DuckDBPyConnection,
    stream: str,
    stream_sql: str,
    position: Position,
    limit: int = DEFAULT_LIMIT,
    known: tuple[list[Publish], str] | None = None,
    walks: WalkListings | None = None,
    records_now: RecordsNow | None = None,
    change_files: ChangeFileSource | None = None,
) -> FeedPage:
    """One page of ``stream``'s walk from ``position``, on a snapshot's connection; ``known``
    gives the publishes the stream's history keeps (``kept_for``) and the mirror's name when the
    caller holds them already. A server passes what it keeps of the snapshot: ``walks``, the
    listings of the walks it answers, and
    ``records_now``, the stream's current records where it holds them, and ``change_files``,
    from which a walk since a publish is sliced where its pinned publish wrote one.

    HistoryGone when the position needs publishes no longer kept; a position ahead of this
    snapshot's history (a token from a replica that is further on) is caught up."""
    if known is None:
        known = (kept_for(publishes(con), horizons(con), stream), mirror_id(con))
    kept, mirror = known
    sliced = sliced_page(stream, position, limit, (kept, mirror), change_files)
    if sliced is not None:
        return sliced
    walk = _Pinned.of(stream, stream_sql, position, kept, mirror)
    listing = _held_listing(con, walk, walks)
    if listing is None:  # a walk's first page (most walks have no other), or a listing too large
        after_version, after_key = position.after or (-1, "")
        bounds = {"after_version": after_version, "after_key": after_key, "limit": limit + 1}
        listed = run_statement(con, walk.sql, {**walk.params, **bounds}).fetchall()
    else:
        start = listing.after(*(position.after or (-1, "")))
        if records_now is not None and walk.current:
            page = _columns_page(walk, listing, start, limit, records_now)
            if page is not None:
                return page
        listed = listing.entries(start, limit + 1)
    return _entries_page(con, walk, listed, limit, records_now)


@dataclass(frozen=True)
class _Pinned:
    """A page of a walk to read from the snapshot: where the walk stands, the publishes kept
    (by number, and the oldest), the one it is pinned to, and the statement listing it."""

    stream: str
    stream_sql: str
    position: Position
    mirror: str
    by_seq: dict[int, Publish]
    oldest: Publish
    pin: int
    current: bool  # pinned to the snapshot's own publish
    statement: str
    sql: str
    params: dict[str, object]

    @classmethod
    def of(
        cls, stream: str, stream_sql: str, position: Position, kept: list[Publish], mirror: str
    ) -> _Pinned:
        """The page of ``stream``'s walk from ``position``, among the publishes ``kept``."""
        by_seq = {publish.seq: publish for publish in kept}
        oldest, head = kept[0], kept[-1]
        pin = head.seq if position.pin is None else position.pin
        if position.since is None:
            statement = "current" if pin == head.seq else "loaded_at"
        else:
            statement = "changed"
        params = {"stream": stream, "since": position.since, "pin": pin, "oldest": oldest.seq}
        return cls(
            stream, stream_sql, position, mirror, by_seq, oldest, pin, pin == head.seq,
            statement, feed_statement(statement, stream_sql), params,
        )  # fmt: skip

    def publish_of(self, version: int) -> Publish:
        """The publish numbered ``version`` (the oldest kept for one before it)."""
        return self.by_seq.get(version, self.oldest)

    def token_after(self, last: tuple[int, str] | None) -> str:
        """The token that goes on after a page whose last entry is ``last`` (None: the walk
        has no more)."""
        return encode_token(_next_position(self.stream, self.position, self.pin, last), self.mirror)


def _held_listing(
    con: duckdb.DuckDBPyConnection, walk: _Pinned, walks: WalkListings | None
) -> Listing | None:
    """The whole listing of the walk as a server keeps it for the walk's later pages (None on
    its first page, where most walks end, or when the server keeps none)."""
    if walks is None or walk.position.after is None:
        return None
    whole = {**walk.params, "after_version": -1, "after_key": "", "limit": WHOLE_LISTING}
    return walks.get_or_read(
        (walk.statement, walk.stream, walk.position.since, walk.pin),
        lambda: con.sql(walk.sql, params=named_parameters(walk.sql, whole)).to_arrow_table(),
    )


def _columns_page(
    walk: _Pinned, listing: Listing, start: int, limit: int, records_now: RecordsNow
) -> FeedPage | None:
    """The page as columns of the listing and the records the server holds (None when they
    cannot make it)."""
    # Imported here: it imports Arrow, which only a server answering the feed needs.
    from ductwork.history.page_columns import listed_columns

    columns = listed_columns(listing, start, limit, records_now, walk.publish_of)
    if columns is None:
        return None
    more = start + len(columns) < len(listing)
    last = (int(columns.versions[-1]), columns.keys[-1].as_py()) if more else None
    return FeedPage(columns, walk.token_after(last), more, walk.by_seq[walk.pin], columns.write)


def _entries_page(
    con: duckdb.DuckDBPyConnection,
    walk: _Pinned,
    listed: list[tuple[str, int]],
    limit: int,
    records_now: RecordsNow | None,
) -> FeedPage:
    """The page of the ``listed`` (key, version) pairs (one more than ``limit`` when the walk
    goes on), each with its record: the server's where it holds them, else the snapshot's."""
    more = len(listed) > limit
    listed = listed[:limit]
    keys = [key for key, _ in listed]
    records = None
    if records_now is not None and walk.current:
        records = records_now.records_by_key(keys)
    if records is None:
        pin = None if walk.current else walk.pin
        records = records_of_keys(con, walk.stream_sql, keys, pin)
    changes = []
    for key, version in listed:
        publish = walk.publish_of(version)
        record = records.get(key)
        op = "upsert" if record is not None else "delete"
        changes.append(Change(op, key, publish.version, publish.published_at, record))
    last = (listed[-1][1], listed[-1][0]) if more else None
    return FeedPage(changes, walk.token_after(last), more, walk.by_seq[walk.pin])


def sliced_page(
    stream: str,
    position: Position,
    limit: int,
    known: tuple[list[Publish], str],
    change_files: ChangeFileSource | None,
) -> FeedPage | None:
    """The page of ``stream``'s walk from ``position`` when it needs no read of the snapshot:
    a walk since a token, sliced from the change file of the publish it is pinned to, or a
    walk caught up, or pinned on a publish the snapshot does not know yet; None otherwise
    (``read_page`` reads it). ``known``: the snapshot's publishes and the mirror's name.
    HistoryGone when the position needs publishes no longer kept."""
    kept, mirror = known
    if not kept:
        raise HistoryGone(datetime.fromtimestamp(0).astimezone())
    by_seq = {publish.seq: publish for publish in kept}
    oldest, head = kept[0], kept[-1]
    pin = head.seq if position.pin is None else position.pin
    if pin > head.seq:  # pinned on a publish this snapshot does not know yet
        return FeedPage([], encode_token(position, mirror), False, head)
    if pin < oldest.seq or (position.since is not None and position.since < oldest.seq):
        raise HistoryGone(oldest.published_at)
    if position.since is not None and position.since >= pin:
        caught_up = Position(stream, max(position.since, pin))
        return FeedPage([], encode_token(caught_up, mirror), False, by_seq[pin])
    if position.since is None or change_files is None:
        return None
    found = change_files.change_file(stream, by_seq[pin].version)
    if found is None:
        return None
    since, after = position.since, position.after
    changes, more = found.page(since, after, limit, lambda v: by_seq.get(v, oldest))
    last = (int(changes.versions[-1]), changes.keys[-1].as_py()) if more else None
    token = encode_token(_next_position(stream, position, pin, last), mirror)
    return FeedPage(changes, token, more, by_seq[pin], changes.write)


def _next_position(
    stream: str, position: Position, pin: int, last: tuple[int, str] | None
) -> Position:
    """Where a walk goes on after a page: after its ``last`` (version, key) while the walk has
    more (None: it has not), else from the pinned publish, a new walk."""
    if last is None:
        return Position(stream, pin)
    return Position(stream, position.since, pin, last)


def records_since(con: duckdb.DuckDBPyConnection, stream: str) -> dict[str, int]:
    """Each current record of ``stream`` (by key) with the publish since which it is as it is."""
    rows = con.execute(section("history_feed", "records_since"), {"stream": stream}).fetchall()
    return dict(rows)
