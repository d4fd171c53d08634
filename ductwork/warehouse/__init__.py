"""Writes to the DuckDB warehouse (tables, bookmarks), with no Dagster."""
