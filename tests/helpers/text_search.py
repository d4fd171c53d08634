"""Searching a DuckDB file for text as DuckDB reads it (a byte search of a compressed file
proves nothing): what erasure tests look for in every copy of a person's data."""

from __future__ import annotations

from pathlib import Path

import duckdb


def text_hits(database: Path, needles: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """Every (table, column, rows) of the file whose text holds any of ``needles``: each
    VARCHAR and JSON column of each table of each schema, read by DuckDB itself."""
    found = []
    with duckdb.connect(str(database), read_only=True) as con:
        columns = con.execute(
            "SELECT schema_name, table_name, column_name FROM duckdb_columns() "
            "WHERE database_name = current_database() AND NOT internal "
            "AND data_type IN ('VARCHAR', 'JSON') "
            "AND (schema_name, table_name) IN "
            "(SELECT schema_name, table_name FROM duckdb_tables() "
            " WHERE database_name = current_database())"
        ).fetchall()
        for schema, table, column in columns:
            rows = con.execute(
                f'SELECT count(*) FROM "{schema}"."{table}" AS t, unnest(?) AS n(needle) '
                f'WHERE contains(CAST(t."{column}" AS VARCHAR), n.needle)',
                [list(needles)],
            ).fetchall()[0][0]
            if rows:
                found.append((f"{schema}.{table}", column, rows))
    return found
