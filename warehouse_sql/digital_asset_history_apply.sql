-- New versions in `digital_asset_history` for the assets a batch's upsert applied (the temp
-- table `applied_assets`, which this drops), run in the transaction of that upsert. A version is
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
    WHERE asset_id IN (SELECT asset_id FROM applied_assets WHERE was_stored)
    GROUP BY asset_id
)
SELECT
    a.asset_id, a.sku, a.asset_type, a.title, a.url, a.mime_type, a.language,
    a.file_size_bytes, a.updated_at, a.record_hash, a.was_stored,
    greatest(least(coalesce(a.updated_at, now()), now()), last.last_from, last.last_to)
        AS change_at
-- Hashed once per row, here: the filter and the select list both use the hash, and DuckDB
-- computes an expression written out in each of them twice.
FROM (SELECT *, md5(record::VARCHAR) AS record_hash FROM applied_assets) AS a
LEFT JOIN last ON last.asset_id = a.asset_id
WHERE last.current_hash IS DISTINCT FROM a.record_hash;

UPDATE digital_asset_history AS h SET valid_to = v.change_at, is_current = false
FROM (SELECT * FROM asset_versions WHERE was_stored) AS v
WHERE h.asset_id = v.asset_id AND h.is_current;

INSERT INTO digital_asset_history BY NAME
SELECT
    asset_id, change_at AS valid_from, NULL AS valid_to, true AS is_current, sku, asset_type,
    title, url, mime_type, language, file_size_bytes, updated_at, record_hash
FROM asset_versions;

DROP TABLE asset_versions;
DROP TABLE applied_assets;
