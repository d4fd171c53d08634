-- Built inside every published snapshot (never in the working warehouse): the large lists in
-- the contract's order, numbered, so the read API pages by position without sorting.

-- Live digital assets by (updatedAt, assetId).
CREATE TABLE serving_digital_assets AS
SELECT
    (row_number() OVER (ORDER BY updated_at, asset_id) - 1)::BIGINT AS pos,
    epoch_us(updated_at) AS updated_us,
    record
FROM digital_assets
WHERE deleted_at IS NULL
ORDER BY pos;

-- Leads by (CreatedDate, Id).
CREATE TABLE serving_leads AS
SELECT
    (row_number() OVER (ORDER BY created_at, id) - 1)::BIGINT AS pos,
    epoch_us(created_at) AS created_us,
    id,
    record
FROM leads
ORDER BY pos;
