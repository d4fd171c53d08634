-- Remember the ids that pages of a digital-asset page walk listed (the list parameter). An id
-- listed again (its updatedAt moved while the walk went on) is stored again: skipping ids
-- already present scanned the whole table for every page, which grew a large sync's asset step
-- with the square of its size. Readers count distinct ids.
INSERT INTO digital_asset_walk_ids
SELECT DISTINCT listed.asset_id
FROM unnest(?::VARCHAR[]) AS listed(asset_id);
