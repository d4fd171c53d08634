-- Remember the ids that pages of a digital-asset page walk listed (the list parameter).
INSERT INTO digital_asset_walk_ids
SELECT DISTINCT listed.asset_id
FROM unnest(?::VARCHAR[]) AS listed(asset_id)
WHERE listed.asset_id NOT IN (SELECT asset_id FROM digital_asset_walk_ids);
