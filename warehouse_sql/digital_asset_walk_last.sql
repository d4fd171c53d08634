-- The newest (updatedAt, assetId) among the assets a finished page walk listed: where the
-- stream's bookmark moves to. Ordered by the instant, not the text: the upstream may write
-- instants in more than one form (the caller normalises the text it returns).
SELECT a.updated_at_text, a.asset_id
FROM digital_assets AS a
JOIN digital_asset_walk_ids AS w USING (asset_id)
WHERE a.updated_at_text IS NOT NULL
ORDER BY a.updated_at DESC NULLS LAST, a.asset_id DESC
LIMIT 1;
