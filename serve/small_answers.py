"""Answers of one snapshot small enough to hold whole: submittals and the internal lists."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class SmallAnswers:
    """Submittals by (idu, odu), and the ready bodies of the internal family's lists."""

    submittals: dict[tuple[str | None, str | None], bytes]
    contractors: bytes | None
    indoor_models: bytes
    manuals: bytes


def _joined(rows: list[tuple]) -> bytes:
    return b'{"success":true,"data":[' + b",".join(r[0].encode() for r in rows) + b"]}"


def load_small_answers(con: duckdb.DuckDBPyConnection) -> SmallAnswers:
    """Read them from a snapshot."""
    submittals = {
        (idu, odu): record.encode()
        for idu, odu, record in con.execute(
            "SELECT idu, odu, record FROM submittals WHERE found"
        ).fetchall()
    }
    raw = con.execute("SELECT body FROM contractors_raw ORDER BY synced_at DESC LIMIT 1").fetchall()
    models = con.execute("SELECT record FROM indoor_models ORDER BY ordinal").fetchall()
    manuals = con.execute("SELECT record FROM manuals ORDER BY key").fetchall()
    return SmallAnswers(
        submittals=submittals,
        contractors=raw[0][0].encode() if raw else None,
        indoor_models=_joined(models),
        manuals=_joined(manuals),
    )
