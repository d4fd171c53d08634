-- Every table and view of the main schema with its comment, for the data dictionary and exports.
SELECT table_name AS name, 'table' AS kind, comment
FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
  AND NOT temporary
UNION ALL
SELECT view_name AS name, 'view' AS kind, comment
FROM duckdb_views()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
  AND NOT temporary
ORDER BY kind, name;
