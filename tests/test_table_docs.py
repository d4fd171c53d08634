"""Dagster's catalog is the data dictionary: every asset names its table and documents its
columns from the same SQL that DuckDB applies."""

from __future__ import annotations

import dagster as dg
import duckdb

from ductwork.warehouse.schema import comment_sql, schema_sql
from ductwork.warehouse.table_docs import table_docs
from pipelines.definitions import defs


def test_the_parsed_tables_match_what_duckdb_builds_from_the_same_files() -> None:
    con = duckdb.connect()
    con.execute(schema_sql())
    for comments in comment_sql():
        con.execute(comments)
    built = {
        (table, column): (data_type, comment or "")
        for table, column, data_type, comment in con.execute(
            "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND NOT internal"
        ).fetchall()
    }
    docs = {name: doc for name, doc in table_docs().items() if name != "snapshot_info"}
    assert {table for table, _ in built} == set(docs)
    for table, doc in docs.items():
        for column in doc.columns:
            normalised = con.execute(f"SELECT typeof(NULL::{column.type})").fetchone()[0]
            assert built[(table, column.name)] == (normalised, column.comment), (table, column)
        assert len(doc.columns) == sum(1 for name, _ in built if name == table), table


def test_every_asset_that_writes_a_table_names_it_and_describes_every_column() -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        metadata = graph.get(key).metadata
        if key == dg.AssetKey("change_notifications"):  # writes no table: POSTs to subscribers
            assert "dagster/table_name" not in metadata
            continue
        assert str(metadata["dagster/table_name"]).startswith("warehouse.main."), key
        columns = metadata["dagster/column_schema"].columns
        assert columns and all(column.description for column in columns), key
