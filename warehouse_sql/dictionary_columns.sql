-- The columns of one table or view (parameter: its name) with types, nullability and comments.
SELECT column_name, data_type, is_nullable, comment
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND table_name = ?
ORDER BY column_index;
