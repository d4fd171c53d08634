-- The name and file of the database in use (the warehouse, when publishing a snapshot).
SELECT database_name, path FROM duckdb_databases() WHERE database_name = current_database();
