-- Bookkeeping tables that still carry the primary key of releases before they went unindexed
-- (see `lead_detail_queue` in crm.sql and `digital_asset_walk_ids` in sync_state.sql): such a
-- warehouse is rebuilt once, with bookkeeping_set_aside.sql and bookkeeping_restore.sql.
SELECT DISTINCT table_name
FROM duckdb_constraints()
WHERE database_name = current_database()
  AND schema_name = 'main'
  AND constraint_type = 'PRIMARY KEY'
  AND table_name IN ('lead_detail_queue', 'digital_asset_walk_ids')
ORDER BY table_name;
