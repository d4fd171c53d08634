"""What a publish adds to the mirror's memory, in the warehouse's ``history`` schema, before the
warehouse is copied into the new snapshot (so every snapshot carries the history up to itself).

For every table a stream writes, the rows that changed or went since the last publish: their
content as that publish had it (read from its snapshot) becomes a closed version, valid from
the publish that made it to this one; each current row keeps the publish since which it is as
it is. For every stream, the keys whose record (the JSON the feed carries) changed or went are
logged against this publish. Versions older than the history kept are dropped, never a current
row; a stream kept shorter (personal data, ``DUCTWORK_HISTORY_DAYS_<STREAM>``) loses its own
older versions and logged changes sooner, and its horizon (the oldest publish it still keeps)
is recorded for the feed and the past to refuse what lies before it.

If the warehouse's history does not end at the current snapshot's publish (a publish that
failed after recording it), it is first brought back to that snapshot's own.

A table whose content is the current snapshot's (the publish knows it from the two content
fingerprints) has no row that changed or went, and a stream whose feed reads only such tables
no record that did: both are passed over, so a publish compares only the tables that changed
(each of them whole), not all the mirror holds.

Likewise a stream whose SQL declares ``changed_keys`` (the keys whose record may differ from the
last publish's, read from the keys of its tables' rows that changed or went, ``changed_name``)
has only those keys' records compared with its recorded state, when the publish follows the
change (``follow_changes``: same release as the current snapshot, no erasure); the others' records
are the ones recorded, since none of their rows changed.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from ductwork.history.database_tables import current_database, history_tables
from ductwork.history.recording_sql import PREVIOUS, recording_sql
from ductwork.history.row_versions import (
    drop_versions_ended_by,
    kept_tables,
    version_tables,
)
from ductwork.streams.registry import STREAMS
from warehouse_sql import section, stream_section

# Shared tables of the history schema (the rest are one pair per stream table).
SHARED = ("publishes", "mirror", "feed_state", "feed_log", "horizons")


# Run inside a publish's transaction once the warehouse's history is the current snapshot's
# and the publish's sequence number is known: ``ductwork forget`` erases keys there
# (``ductwork.erasure.warehouse``), so a history brought back from that snapshot loses them too.
Erase = Callable[[duckdb.DuckDBPyConnection, int], None]


@dataclass(frozen=True)
class Recorded:
    """What a publish recorded: its sequence number, and the changes it logged."""

    seq: int
    changes: int


def record_publish(
    con: duckdb.DuckDBPyConnection,
    live: Path | None,
    version: str,
    published_at: datetime,
    keep: timedelta,
    unchanged: Collection[str] = (),
    stream_keep: Mapping[str, timedelta] | None = None,
    erase: Erase | None = None,
    hashed: Collection[str] = (),
    follow_changes: bool = False,
) -> Recorded:
    """Record a publish of ``version`` (the warehouse as ``con`` holds it) against ``live``,
    the current snapshot's file (None before the first publish), in one transaction.

    ``unchanged`` names the tables whose content is known to be the current snapshot's: their
    rows are not compared again, nor the records of a stream whose feed reads only them.
    ``stream_keep`` names the streams whose history is kept shorter than ``keep``, and how long.
    ``erase``, when given, runs in the transaction before any row is compared (see ``Erase``).
    ``hashed`` names the tables whose current rows ``hash_current_rows`` hashed since they were
    last written: their rows are compared by those hashes, not hashed again.
    ``follow_changes``: the stream's recorded state is the current snapshot's, of this release
    (see the module's docstring): a stream declaring ``changed_keys`` has only those compared.
    """
    with _live_attached(con, live):
        con.execute("BEGIN TRANSACTION")
        try:
            seq = _begin_publish(con, live is not None, erase)
            version_tables(con, seq, live is not None, unchanged, hashed)
            con.execute(section("history", "macros"))
            changes = _log_feeds(con, seq, unchanged, follow_changes)
            con.execute(section("history", "record_publish"), [seq, version, published_at])
            oldest = _prune(con, published_at - keep)
            _prune_streams(con, published_at, oldest, stream_keep or {})
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return Recorded(seq, changes)


@contextmanager
def _live_attached(con: duckdb.DuckDBPyConnection, live: Path | None) -> Iterator[None]:
    """The current snapshot's file attached read-only as ``PREVIOUS`` meanwhile, if any."""
    if live is not None:
        con.execute(recording_sql("attach_previous"), [str(live)])
    try:
        yield
    finally:
        if live is not None:
            con.execute(recording_sql("detach_previous"))


def _begin_publish(con: duckdb.DuckDBPyConnection, has_live: bool, erase: Erase | None) -> int:
    """Bring the warehouse's history to the current snapshot's and give the publish its
    sequence number (and the mirror its name at its first); the erasure, if any, runs then.
    Returns the sequence number."""
    _follow_live_history(con, has_live)
    seq = _next_seq(con)
    _ensure_mirror_id(con)
    if erase is not None:
        erase(con, seq)
    return seq


def _next_seq(con: duckdb.DuckDBPyConnection) -> int:
    head = con.execute(section("history", "head")).fetchall()
    return head[0][0] + 1 if head else 1


def _ensure_mirror_id(con: duckdb.DuckDBPyConnection) -> None:
    if not con.execute(section("history", "mirror_id")).fetchall():
        con.execute(section("history", "set_mirror_id"), [secrets.token_hex(16)])


def _follow_live_history(con: duckdb.DuckDBPyConnection, has_live: bool) -> None:
    """Make the warehouse's history the current snapshot's, unless it already ends there."""
    head = con.execute(section("history", "head")).fetchall()
    live_head = (
        con.execute(recording_sql("live_head")).fetchall()
        if has_live and "publishes" in history_tables(con, PREVIOUS)
        else []
    )
    if head == live_head:
        return
    for table in history_tables(con, current_database(con)):
        con.execute(recording_sql("drop_history_table", {"table": table}))
    con.execute(section("history", "tables"))
    if not live_head:
        return
    for table in history_tables(con, PREVIOUS):
        copy = "copy_shared_table" if table in SHARED else "copy_table"
        con.execute(recording_sql(copy, {"table": table}))


def as_of_macro(stream_sql: str) -> str:
    """The stream's ``as_of`` section: the ``<stream>_as_of(v)`` macro that the changes feed
    and the past read its records from; ValueError naming the file when it has none."""
    found = stream_section(stream_sql, "as_of")
    if not found:
        raise ValueError(
            f"warehouse_sql/streams/{stream_sql}.sql has no as_of section: the changes feed "
            f"needs {stream_sql}_as_of(v), the stream's key and record at publish v"
        )
    return found


def feed_tables(stream_sql: str) -> set[str]:
    """The tables whose rows a stream's feed reads: those whose ``<table>_at(v)`` its
    ``as_of`` section calls."""
    tables = {table.name for table in kept_tables()}
    called = re.findall(r"\b(\w+)_at\(", as_of_macro(stream_sql))
    return {name for name in called if name in tables}


def _log_feeds(
    con: duckdb.DuckDBPyConnection, seq: int, unchanged: Collection[str], follow: bool
) -> int:
    """Make every stream's ``<stream>_as_of`` macro, and log the changes of its records unless
    its feed reads only unchanged tables; returns how many were logged."""
    changes = 0
    for stream in STREAMS:
        con.execute(as_of_macro(stream.sql))
        read = feed_tables(stream.sql)
        if not read or not read <= set(unchanged):
            changes += _log_feed(con, stream.name, stream.sql, seq, follow)
    return changes


def _log_feed(
    con: duckdb.DuckDBPyConnection, stream: str, stream_sql: str, seq: int, follow: bool
) -> int:
    """Log the keys of ``stream`` whose record changed or went; returns how many. ``follow``:
    compare only the keys its ``changed_keys`` section gives, when it has one."""
    changed = stream_section(stream_sql, "changed_keys") if follow else ""
    if changed:
        con.execute(recording_sql("feed_keys", records=changed))
    con.execute(
        recording_sql("feed_now_table", records=_records_now(stream_sql, bool(changed))),
        {"keys": _feed_keys(con)} if changed else {},
    )
    before = _logged(con, seq, stream)
    compare = "feed_now_of_keys" if changed else "feed_now"
    con.execute(section("history", compare), {"stream": stream, "seq": seq})
    logged = _logged(con, seq, stream) - before
    for step in ("feed_state_forget", "feed_state_add"):
        con.execute(section("history", step), {"stream": stream, "seq": seq})
    return logged


def _records_now(stream_sql: str, of_keys: bool) -> str:
    """A query of the stream's current records (``key``, ``record``): every one, or
    (``of_keys``) those of the keys ``$keys``, read by its ``feed_records_now`` section when
    it has one (its quicker way to the rows of a few keys)."""
    macro = {"macro": f"{stream_sql}_as_of"}
    if not of_keys:
        return recording_sql("records_now", macro)
    quicker = stream_section(stream_sql, "feed_records_now").strip().removesuffix(";")
    return quicker or recording_sql("records_now_of_keys", macro)


def _feed_keys(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The keys of the temp table ``feed_keys``."""
    return con.execute(recording_sql("feed_key_list")).fetchall()[0][0]


def _logged(con: duckdb.DuckDBPyConnection, seq: int, stream: str) -> int:
    return con.execute(recording_sql("logged"), [seq, stream]).fetchall()[0][0]


def _prune(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> int:
    """Drop what no instant after the cutoff needs: publishes before the oldest kept, changes
    up to it, and row versions that ended by then. Returns the oldest publish kept."""
    oldest = con.execute(section("history", "oldest_kept"), [cutoff]).fetchall()[0][0]
    con.execute(section("history", "prune_publishes"), [oldest])
    con.execute(section("history", "prune_feed_log"), [oldest])
    con.execute(section("history", "prune_horizons"), [oldest])
    for table in kept_tables():
        drop_versions_ended_by(con, table.name, oldest)
    return oldest


def _prune_streams(
    con: duckdb.DuckDBPyConnection,
    published_at: datetime,
    oldest: int,
    stream_keep: Mapping[str, timedelta],
) -> None:
    """Drop, for each stream kept shorter than the rest, its logged changes and its tables'
    row versions that no instant after its own cutoff needs, and record its horizon (which
    only moves forward). A table another stream writes too is pruned to the longest horizon
    of its streams."""
    horizons: dict[str, int] = {}
    for stream, keep in stream_keep.items():
        cutoff = published_at - keep
        seq = con.execute(section("history", "oldest_kept"), [cutoff]).fetchall()[0][0]
        recorded = con.execute(section("history", "horizon"), [stream]).fetchall()
        seq = max(seq, recorded[0][0] if recorded else seq)
        if seq <= oldest:
            continue
        horizons[stream] = seq
        con.execute(section("history", "drop_horizon"), [stream])
        con.execute(section("history", "set_horizon"), [stream, seq])
        con.execute(section("history", "prune_stream_feed_log"), {"stream": stream, "seq": seq})
    for table, writers in _table_writers().items():
        horizon = min(horizons.get(stream, oldest) for stream in writers)
        if horizon > oldest:
            drop_versions_ended_by(con, table, horizon)


def _table_writers() -> dict[str, list[str]]:
    """Every versioned table with the streams that write it."""
    writers: dict[str, list[str]] = {}
    for stream in STREAMS:
        for table in stream.tables:
            writers.setdefault(table.name, []).append(stream.name)
    return writers
