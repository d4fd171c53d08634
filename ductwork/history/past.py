"""The mirror as it was: which publish an instant names, and that publish's snapshot rebuilt
from a later snapshot's history, so that the read API can serve it as it served it then.

An instant is an RFC 3339 date-time (the publish current at that moment) or a snapshot's
version. The rebuilt file holds every table the read API reads, as of that publish, with the
tables publishing adds (the large lists' numbering): the read API loads it as any snapshot.
"""

from __future__ import annotations

import bisect
import re
from datetime import datetime
from pathlib import Path

from ductwork.contract.encoding import parse_datetime
from ductwork.history.feed_entries import Publish
from ductwork.history.row_versions import kept_tables
from ductwork.snapshots.guard import lock_down, unlocked_connection
from ductwork.streams.registry import STREAMS
from warehouse_sql import quote_identifier, read_sql, stream_section

# What ``ductwork.snapshots.new_version`` makes: UTC time to the microsecond, a random tail.
VERSION = re.compile(r"[0-9]{8}T[0-9]{12}Z-[0-9a-f]{6}")


class BadInstant(ValueError):
    """Neither an RFC 3339 date-time nor a snapshot version."""


class BeforeHistory(LookupError):
    """The instant is older than the oldest publish kept."""

    def __init__(self, oldest: Publish) -> None:
        super().__init__("history before the oldest publish kept is not available")
        self.oldest = oldest


def parse_instant(text: str) -> datetime | str:
    """A date-time, or a snapshot version (``20261127T043435698114Z-71da4a``)."""
    if _looks_like_version(text):
        return text
    try:
        return parse_datetime(text)
    except ValueError:
        raise BadInstant(f"{text[:80]!r} is neither an RFC 3339 date-time nor a version") from None


def _looks_like_version(text: str) -> bool:
    return VERSION.fullmatch(text) is not None


def publish_at(kept: list[Publish], instant: datetime | str) -> Publish:
    """The publish an instant names: the version itself, or the newest published at or before
    the date-time (an instant after the newest names the newest). BeforeHistory when it is
    older than every publish kept; BadInstant for a version this history does not hold."""
    if not kept:
        raise BadInstant("nothing has been published yet")
    if isinstance(instant, str):
        for publish in kept:
            if publish.version == instant:
                return publish
        if instant < kept[0].version:
            raise BeforeHistory(kept[0])
        raise BadInstant(f"no snapshot {instant!r} in the history kept")
    moments = [publish.published_at for publish in kept]
    index = bisect.bisect_right(moments, instant) - 1
    if index < 0:
        raise BeforeHistory(kept[0])
    return kept[index]


def rebuild(snapshot: Path, publish: Publish, out: Path) -> None:
    """Write ``out``: the snapshot of ``publish``, rebuilt from ``snapshot``'s history (``out``
    must not exist; a partly written file is removed)."""
    con = unlocked_connection()
    try:
        con.execute("ATTACH ? AS source (READ_ONLY)", [str(snapshot)])
        con.execute("ATTACH ? AS past", [str(out)])
        lock_down(con)  # the history's macros run next: they reach nothing else
        con.execute("USE source")  # the history's macros name its tables unqualified
        for table in kept_tables():
            macro = quote_identifier(f"{table.name}_at")
            con.execute(
                f"CREATE TABLE past.main.{quote_identifier(table.name)} AS "
                f"SELECT * FROM {macro}(?)",
                [publish.seq],
            )
        con.execute("USE past")  # the serving tables are built beside the rebuilt tables
        for stream in STREAMS:
            serving = stream_section(stream.sql, "serving")
            if serving:
                con.execute(serving)
        con.execute(read_sql("snapshot_info"), [publish.version, "rebuilt from history"])
        con.execute("CHECKPOINT past")
    except BaseException:
        con.close()
        out.unlink(missing_ok=True)
        Path(f"{out}.wal").unlink(missing_ok=True)
        raise
    con.close()
