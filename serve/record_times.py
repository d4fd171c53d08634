"""When the mirror first served a record's content: ``Last-Modified`` of single-record answers.

The history's feed state holds, per stream and key, the publish since which the record is as it
is; that publish's time is when the mirror first served this content. For the streams looked up
from memory (the products, the pairings, the submittals) every key's publish is loaded with the
snapshot. A lead's details carry none: without an index (see ``history.feed_state``) one key's
publish is a scan of every stream's keys, about 15 ms at a million and a half, on every request.
A record whose publish the history no longer keeps gets no ``Last-Modified`` (its content is
older than anything the mirror can vouch for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.utils import formatdate

import duckdb

from ductwork.history.feed import Publish, records_since
from ductwork.streams.model import Serving
from ductwork.streams.registry import served_as

# The streams whose records a worker holds in memory and looks up there: their times too.
HELD = tuple(s.name for kind in (Serving.CATALOG, Serving.LOOKUP) for s in served_as(kind))


@dataclass(frozen=True)
class RecordTimes:
    """Each held stream's keys with the publish since which their record is as it is, and each
    publish kept with its time and its ``Last-Modified`` value."""

    since: dict[str, dict[str, int]] = field(default_factory=dict)
    published: dict[int, tuple[float, bytes]] = field(default_factory=dict)

    def of(self, stream: str, key: str) -> tuple[float, bytes] | None:
        """When the record ``key`` of a held stream was first served as it is (epoch seconds,
        and as an HTTP date); None when unknown."""
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
    return RecordTimes({stream: records_since(con, stream) for stream in HELD}, published)
