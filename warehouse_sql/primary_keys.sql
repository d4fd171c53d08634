-- Each table's primary-key columns, in the database in use (a key check need not count the
-- NULL and duplicate keys that DuckDB refuses on its own).
SELECT table_name, constraint_column_names
FROM duckdb_constraints()
WHERE database_name = current_database() AND schema_name = 'main'
  AND constraint_type = 'PRIMARY KEY';
