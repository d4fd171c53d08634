-- The columns whose values make up the warehouse's content, table by table (for the content
-- fingerprint that lets a publish be skipped when nothing changed). Left out: the columns that
-- only say when this run wrote a row or a bookmark, which a run rewrites without a change
-- upstream.
SELECT table_name, list(column_name ORDER BY column_index) AS columns
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
  AND table_name IN (
      SELECT table_name FROM duckdb_tables()
      WHERE database_name = current_database() AND schema_name = 'main' AND NOT temporary
  )
  AND column_name <> 'synced_at'
  AND NOT (table_name = 'sync_state' AND column_name = 'updated_at')
GROUP BY table_name
ORDER BY table_name;
