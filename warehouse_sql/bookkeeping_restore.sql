-- Rebuilding the bookkeeping tables without their old primary key, step 2 of 2: every row
-- back into the tables the DDL created anew, and the old tables gone.
INSERT INTO lead_detail_queue (id) SELECT id FROM lead_detail_queue_keyed;
INSERT INTO digital_asset_walk_ids (asset_id) SELECT asset_id FROM digital_asset_walk_ids_keyed;
DROP TABLE lead_detail_queue_keyed;
DROP TABLE digital_asset_walk_ids_keyed;
