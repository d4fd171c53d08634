"""What a snapshot holds, read from DuckDB's own catalog: tables, views, columns, comments and
row counts. Shared by the data dictionary and the exports."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from warehouse_sql import fill, read_sql, section


@dataclass(frozen=True)
class Column:
    """One column of a table or view."""

    name: str
    data_type: str
    nullable: bool
    comment: str | None


@dataclass(frozen=True)
class Relation:
    """One table or view with its columns and row count."""

    name: str
    kind: str  # "table" or "view"
    comment: str | None
    columns: tuple[Column, ...]
    rows: int


def describe(con: duckdb.DuckDBPyConnection) -> list[Relation]:
    """Every table and view of the database's main schema, tables first, by name."""
    found = []
    for name, kind, comment in con.execute(read_sql("dictionary_relations")).fetchall():
        columns = tuple(
            Column(column, data_type, nullable, note or None)
            for column, data_type, nullable, note in con.execute(
                read_sql("dictionary_columns"), [name]
            ).fetchall()
        )
        rows = con.execute(fill(section("tables", "count"), table=name)).fetchall()[0][0]
        found.append(Relation(name, kind, comment or None, columns, rows))
    return found
