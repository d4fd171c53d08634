-- New versions in `digital_asset_history` for the assets of a batch (registered as
-- `incoming_rows`, by `asset_id`), run in the transaction that upserted the batch. A version is
-- valid from the asset's updatedAt (never later than now, never before the version it follows);
-- an unchanged record (or an older copy the upsert ignored) opens nothing.
CREATE OR REPLACE TEMP TABLE asset_versions AS
WITH last AS (
    SELECT
        asset_id,
        max(valid_from) AS last_from,
        max(valid_to) AS last_to,
        any_value(record_hash) FILTER (WHERE is_current) AS current_hash
    FROM digital_asset_history
    WHERE asset_id IN (SELECT asset_id FROM incoming_rows)
    GROUP BY asset_id
)
SELECT
    d.asset_id, d.sku, d.asset_type, d.title, d.url, d.mime_type, d.language,
    d.file_size_bytes, d.updated_at,
    md5(d.record::VARCHAR) AS record_hash,
    greatest(least(coalesce(d.updated_at, now()), now()), last.last_from, last.last_to)
        AS change_at
FROM (SELECT DISTINCT asset_id FROM incoming_rows) AS i
JOIN digital_assets AS d ON d.asset_id = i.asset_id
LEFT JOIN last ON last.asset_id = d.asset_id
WHERE d.deleted_at IS NULL AND last.current_hash IS DISTINCT FROM md5(d.record::VARCHAR);

UPDATE digital_asset_history AS h SET valid_to = v.change_at, is_current = false
FROM asset_versions AS v
WHERE h.asset_id = v.asset_id AND h.is_current;

INSERT INTO digital_asset_history BY NAME
SELECT
    asset_id, change_at AS valid_from, NULL AS valid_to, true AS is_current, sku, asset_type,
    title, url, mime_type, language, file_size_bytes, updated_at, record_hash
FROM asset_versions;

DROP TABLE asset_versions;
