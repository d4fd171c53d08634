"""The statements a publish runs to record itself (``warehouse_sql/history_recording.sql``),
filled in with the names of the tables they work on."""

from __future__ import annotations

from collections.abc import Iterable

from warehouse_sql import fill, quote_identifier, section

# The name under which the current snapshot's file is attached while a publish is recorded.
PREVIOUS = "previous_snapshot"


def recording_sql(name: str, names: dict[str, str] | None = None, **built: str) -> str:
    """Section ``name`` of ``history_recording.sql``, each ``{placeholder}`` of ``names``
    filled with the quoted identifier given for it, then each of ``built`` with the text given
    (SQL made here from quoted identifiers only, never from a value)."""
    statement = fill(section("history_recording", name), **(names or {}))
    for placeholder, text in built.items():
        statement = statement.replace("{" + placeholder + "}", text)
    return statement


def column_list(columns: Iterable[str], alias: str = "") -> str:
    """``columns`` quoted and comma-separated, each after ``alias.`` when given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{quote_identifier(column)}" for column in columns)


def column_match(columns: Iterable[str], left: str, right: str) -> str:
    """A join condition: each of ``columns`` equal in the rows ``left`` and ``right``."""
    return " AND ".join(
        f"{left}.{quote_identifier(column)} = {right}.{quote_identifier(column)}"
        for column in columns
    )
