"""Answers of one snapshot small enough to hold whole: each lookup stream's records by the
query values that select them, and each document stream's answer, as the registry lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ductwork.streams.model import Serving
from ductwork.streams.registry import served_as
from warehouse_sql import stream_section

# A lookup stream's records by the values of its query parameters (None: not given).
Lookup = dict[tuple[str | None, ...], bytes]


@dataclass(frozen=True)
class SmallAnswers:
    """Lookups and documents of one snapshot, by stream name (a document is None before its
    stream's first sync)."""

    lookups: dict[str, Lookup]
    documents: dict[str, bytes | None]


def load_small_answers(con: duckdb.DuckDBPyConnection) -> SmallAnswers:
    """Read them from a snapshot, through each stream's ``served`` statement."""
    lookups = {
        stream.name: {
            tuple(row[:-1]): row[-1].encode()
            for row in con.execute(stream_section(stream.sql, "served")).fetchall()
        }
        for stream in served_as(Serving.LOOKUP)
    }
    documents: dict[str, bytes | None] = {}
    for stream in served_as(Serving.DOCUMENT):
        rows = con.execute(stream_section(stream.sql, "served")).fetchall()
        documents[stream.name] = rows[0][0].encode() if rows else None
    return SmallAnswers(lookups, documents)
