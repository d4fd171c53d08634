"""What each publish the history keeps changed, stream by stream: the counts behind the read
API's list of publishes (``/_ductwork/v1/publishes``).

The oldest publish kept has no counts: the changes up to it are dropped with the publishes
before it (the history starts from its state), so a caller tells it apart from a publish that
changed nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import duckdb

from warehouse_sql import section


class Counts(NamedTuple):
    """How many records of one stream a publish added or changed (``upsert``) and removed
    (``delete``)."""

    upsert: int
    delete: int


def changes_per_publish(con: duckdb.DuckDBPyConnection) -> dict[int, dict[str, Counts]]:
    """Per publish kept (by its sequence number), the streams it changed and how; a publish
    that changed none is absent."""
    found: dict[int, dict[str, Counts]] = {}
    rows = con.execute(section("history_feed", "changes_per_publish")).fetchall()
    for seq, _, stream, upserts, deletes in rows:
        found.setdefault(seq, {})[stream] = Counts(upserts, deletes)
    return found
