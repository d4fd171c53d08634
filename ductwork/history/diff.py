"""What changed in the streams between two publishes (``ductwork diff``): per stream, records
added, changed and deleted, which members of the changed records changed and how often, and
the members that appeared, disappeared or changed JSON type (schema drift between the two)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import duckdb

from ductwork.history.feed_entries import Publish
from ductwork.streams.model import Stream
from warehouse_sql import fill, section


@dataclass(frozen=True)
class StreamDiff:
    """One stream between two publishes."""

    stream: str
    added: int
    changed: int
    deleted: int
    changed_members: dict[str, int] = field(default_factory=dict)  # member -> records
    appeared: list[str] = field(default_factory=list)  # "member (type)"
    disappeared: list[str] = field(default_factory=list)
    retyped: list[str] = field(default_factory=list)  # "member: type, ... -> type, ..."

    def as_json(self) -> dict[str, object]:
        """The diff as the CLI's JSON prints it."""
        return {
            "stream": self.stream,
            "added": self.added,
            "changed": self.changed,
            "deleted": self.deleted,
            "changedMembers": self.changed_members,
            "schema": {
                "appeared": self.appeared,
                "disappeared": self.disappeared,
                "changedType": self.retyped,
            },
        }


def diff_stream(
    con: duckdb.DuckDBPyConnection, stream: Stream, before: Publish, after: Publish
) -> StreamDiff:
    """``stream`` between ``before`` and ``after``, on a snapshot's connection."""

    def statement(name: str) -> str:
        return fill(section("history_diff", name), records=f"{stream.sql}_as_of")

    params = {"from": before.seq, "to": after.seq}
    added, changed, deleted = con.execute(statement("counts"), params).fetchall()[0]
    members = dict(con.execute(statement("changed_members"), params).fetchall())
    types_before = _types(con, statement("member_types"), before.seq)
    types_after = _types(con, statement("member_types"), after.seq)
    appeared = [
        f"{m} ({', '.join(sorted(types_after[m]))})"
        for m in sorted(types_after.keys() - types_before.keys())
    ]
    disappeared = [
        f"{m} ({', '.join(sorted(types_before[m]))})"
        for m in sorted(types_before.keys() - types_after.keys())
    ]
    retyped = [
        f"{m}: {', '.join(sorted(types_before[m]))} -> {', '.join(sorted(types_after[m]))}"
        for m in sorted(types_before.keys() & types_after.keys())
        if types_before[m] != types_after[m]
    ]
    return StreamDiff(stream.name, added, changed, deleted, members, appeared, disappeared, retyped)


def _types(con: duckdb.DuckDBPyConnection, statement: str, seq: int) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for member, kind, _ in con.execute(statement, {"at": seq}).fetchall():
        found[member].add(kind)
    return found
