-- Upsert a batch of digital assets (registered as `incoming_rows`); an older copy of an asset
-- never overwrites a newer one, and a listed asset is no longer deleted.
INSERT INTO digital_assets BY NAME SELECT * FROM incoming_rows
ON CONFLICT (asset_id) DO UPDATE SET
    sku = excluded.sku,
    asset_type = excluded.asset_type,
    title = excluded.title,
    url = excluded.url,
    mime_type = excluded.mime_type,
    language = excluded.language,
    file_size_bytes = excluded.file_size_bytes,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at,
    updated_at_text = excluded.updated_at_text,
    record = excluded.record,
    deleted_at = NULL,
    synced_at = excluded.synced_at
WHERE excluded.updated_at >= digital_assets.updated_at OR digital_assets.updated_at IS NULL;
