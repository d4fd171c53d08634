"""When the mirror first served a record's content: ``Last-Modified`` of single-record answers.

The history's feed state holds, per stream and key, the publish since which the record is as it
is; that publish's time is when the mirror first served this content. For the streams looked up
from memory (the products, the pairings, the submittals) every key's publish is loaded with the
snapshot. A lead's details are read from the snapshot at each request, and a lead's publish
could be too, but without an index (see ``history.feed_state``) that is a scan of every stream's
keys, about 15 ms at a million and a half: so a worker also holds the leads' keys, sorted in one
Arrow array (about 20 bytes a key with its publish, against some 150 in a dict), and finds one by
binary search. A record whose publish the history no longer keeps gets no ``Last-Modified`` (its
content is older than anything the mirror can vouch for).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import formatdate

import duckdb
import numpy as np
import pyarrow as pa

from ductwork.arrow_strings import StringSequence
from ductwork.history.feed import records_since
from ductwork.history.feed_entries import Publish
from ductwork.streams.model import Serving
from ductwork.streams.registry import served_as
from warehouse_sql import section

# The streams whose records a worker holds in memory and looks up there: their times too.
HELD = tuple(s.name for kind in (Serving.CATALOG, Serving.LOOKUP) for s in served_as(kind))
# The streams whose single records are read from the snapshot (a cursor list's details): their
# times are held as sorted keys.
SEARCHED = tuple(s.name for s in served_as(Serving.CURSOR_LIST))


@dataclass(frozen=True)
class SortedSince:
    """A stream's keys in binary order with the publish since which each record is as it is."""

    keys: pa.Array
    since: np.ndarray

    def get(self, key: str) -> int | None:
        """The publish of ``key``; None when the stream has no such key."""
        at = bisect_left(StringSequence(self.keys), key)
        if at < len(self.keys) and self.keys[at].as_py() == key:
            return int(self.since[at])
        return None


def sorted_since(con: duckdb.DuckDBPyConnection, stream: str) -> SortedSince:
    """The stream's record times from a snapshot's history, sorted by key."""
    table = con.sql(
        section("history_feed", "records_since_by_key"), params={"stream": stream}
    ).to_arrow_table()
    return SortedSince(
        table.column(0).combine_chunks(), table.column(1).to_numpy().astype(np.int32)
    )


@dataclass(frozen=True)
class RecordTimes:
    """Each held or searched stream's keys with the publish since which their record is as it
    is, and each publish kept with its time and its ``Last-Modified`` value."""

    since: Mapping[str, Mapping[str, int] | SortedSince] = field(default_factory=dict)
    published: dict[int, tuple[float, bytes]] = field(default_factory=dict)

    def of(self, stream: str, key: str) -> tuple[float, bytes] | None:
        """When the record ``key`` of a held or searched stream was first served as it is
        (epoch seconds, and as an HTTP date); None when unknown."""
        seq = self.since.get(stream, {}).get(key)
        return None if seq is None else self.published.get(seq)


def load_record_times(
    con: duckdb.DuckDBPyConnection, publishes: tuple[Publish, ...]
) -> RecordTimes:
    """The record times of a snapshot whose history keeps ``publishes`` (none: no times)."""
    if not publishes:
        return RecordTimes()
    published = {}
    for publish in publishes:
        moment = publish.published_at.timestamp()
        published[publish.seq] = (moment, formatdate(moment, usegmt=True).encode())
    since: dict[str, Mapping[str, int] | SortedSince] = {
        stream: records_since(con, stream) for stream in HELD
    }
    since.update({stream: sorted_since(con, stream) for stream in SEARCHED})
    return RecordTimes(since, published)
