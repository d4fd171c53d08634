-- Remember the ids one page of a digital-asset page walk listed (registered as listed_ids).
INSERT OR IGNORE INTO digital_asset_walk_ids SELECT DISTINCT asset_id FROM listed_ids;
