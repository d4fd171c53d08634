-- After a complete listing (registered as `listed_ids`): live assets missing from it were
-- deleted upstream. Their current history versions close, then they are marked; returns how
-- many were marked.
UPDATE digital_asset_history SET valid_to = greatest(now(), valid_from), is_current = false
WHERE is_current
  AND asset_id IN (
      SELECT asset_id FROM digital_assets
      WHERE deleted_at IS NULL AND asset_id NOT IN (SELECT asset_id FROM listed_ids)
  );

UPDATE digital_assets SET deleted_at = now()
WHERE deleted_at IS NULL
  AND asset_id NOT IN (SELECT asset_id FROM listed_ids);
