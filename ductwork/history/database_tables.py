"""What recording a publish reads of a database, as DuckDB's catalog lists it: its name, the
tables of a schema, and the columns of the tables of ``main``."""

from __future__ import annotations

import duckdb

from ductwork.history.recording_sql import recording_sql


def current_database(con: duckdb.DuckDBPyConnection) -> str:
    """The name of the database ``con`` uses."""
    return con.execute(recording_sql("current_database")).fetchall()[0][0]


def history_tables(con: duckdb.DuckDBPyConnection, database: str) -> list[str]:
    """The tables of the ``history`` schema of ``database``."""
    rows = con.execute(recording_sql("history_tables"), [database]).fetchall()
    return [row[0] for row in rows]


def main_tables(con: duckdb.DuckDBPyConnection, database: str) -> set[str]:
    """The tables of the ``main`` schema of ``database``."""
    rows = con.execute(recording_sql("main_tables"), [database]).fetchall()
    return {row[0] for row in rows}


def columns_by_table(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The columns of every table of the database in use's ``main`` schema, in order."""
    rows = con.execute(recording_sql("columns_by_table")).fetchall()
    return {table: columns for table, columns in rows}
