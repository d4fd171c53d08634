"""The warehouse's tables as the data dictionary describes them: columns, types and comments.

Read from the SQL files themselves (the ``CREATE TABLE`` statements and the ``COMMENT ON``
statements that every snapshot gets), so that Dagster's catalog and ``ductwork docs`` tell the
same story from one source. Parsed, not executed: it is needed each time the code location
loads, and running the DDL in DuckDB would add to every run's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from ductwork.warehouse.schema import comment_sql, table_sql
from warehouse_sql import read_sql

_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", re.S)
_COLUMN = re.compile(r"^\s+(\w+)\s+([A-Z][A-Z0-9_]*(?:\(\d+(?:,\s*\d+)?\))?(?:\[\])?)")
_QUOTED = r"'((?:[^']|'')*)'"
_TABLE_COMMENT = re.compile(rf"COMMENT ON TABLE (\w+) IS {_QUOTED};")
_COLUMN_COMMENT = re.compile(rf"COMMENT ON COLUMN (\w+)\.(\w+) IS {_QUOTED};")
_NOT_COLUMNS = {"PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT"}


@dataclass(frozen=True)
class ColumnDoc:
    """One column: its name, its DuckDB type ("" where the DDL builds it from a query) and
    its comment."""

    name: str
    type: str
    comment: str


@dataclass
class TableDoc:
    """One table: its comment and its columns, in the DDL's order."""

    comment: str = ""
    columns: list[ColumnDoc] = field(default_factory=list)


@cache
def table_docs() -> dict[str, TableDoc]:
    """Every documented table of the warehouse and its snapshots, by name."""
    types: dict[str, dict[str, str]] = {}
    for text in table_sql():
        for table, body in _CREATE.findall(text):
            columns = types.setdefault(table, {})
            for line in body.splitlines():
                found = _COLUMN.match(line)
                if found and found.group(1).upper() not in _NOT_COLUMNS:
                    columns[found.group(1)] = found.group(2)
    docs: dict[str, TableDoc] = {}
    for text in [*comment_sql(), read_sql("snapshot_info_comments")]:
        for table, comment in _TABLE_COMMENT.findall(text):
            docs.setdefault(table, TableDoc()).comment = _unquote(comment)
        for table, column, comment in _COLUMN_COMMENT.findall(text):
            column_type = types.get(table, {}).get(column, "")
            doc = docs.setdefault(table, TableDoc())
            doc.columns.append(ColumnDoc(column, column_type, _unquote(comment)))
    return docs


def _unquote(text: str) -> str:
    return text.replace("''", "'")
