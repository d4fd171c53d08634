-- Remember the ids that pages of a digital-asset page walk listed (the list parameter).
INSERT OR IGNORE INTO digital_asset_walk_ids SELECT DISTINCT unnest(?::VARCHAR[]);
