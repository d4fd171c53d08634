-- After a complete listing (registered as `listed_ids`): live assets missing from it were
-- deleted upstream. Returns how many were marked.
UPDATE digital_assets SET deleted_at = now()
WHERE deleted_at IS NULL
  AND asset_id NOT IN (SELECT asset_id FROM listed_ids);
