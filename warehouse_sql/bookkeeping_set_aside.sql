-- Rebuilding the bookkeeping tables without their old primary key, step 1 of 2: the tables as
-- they are move aside, so that the schema's own DDL creates them anew; then
-- bookkeeping_restore.sql moves their rows back. One transaction holds all of it.
ALTER TABLE lead_detail_queue RENAME TO lead_detail_queue_keyed;
ALTER TABLE digital_asset_walk_ids RENAME TO digital_asset_walk_ids_keyed;
