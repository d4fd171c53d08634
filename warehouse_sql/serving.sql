-- Built inside every published snapshot (never in the working warehouse): the large lists in
-- the contract's order, numbered, so the read API pages by position without sorting. Each
-- position names its row in the base table by rowid, and the read API reads the record from
-- there: copying 300,000 records into every snapshot was most of a changed run's publish.
-- A checkpoint may compact a table whose rows changed since the last one, moving rows to other
-- rowids; a snapshot's base tables do not change after the copy, and the publish checks that the
-- snapshot's checkpoint moved none of their rows. A published snapshot is never written again.

-- Live digital assets by (updatedAt, assetId).
CREATE TABLE serving_digital_assets AS
SELECT
    (row_number() OVER (ORDER BY updated_at, asset_id) - 1)::BIGINT AS pos,
    epoch_us(updated_at) AS updated_us,
    rowid AS row_id
FROM digital_assets
WHERE deleted_at IS NULL
ORDER BY pos;

-- Leads by (CreatedDate, Id).
CREATE TABLE serving_leads AS
SELECT
    (row_number() OVER (ORDER BY created_at, id) - 1)::BIGINT AS pos,
    epoch_us(created_at) AS created_us,
    id,
    rowid AS row_id
FROM leads
ORDER BY pos;

COMMENT ON TABLE serving_digital_assets IS 'Live digital assets numbered in the contract''s order, for the read API''s paging.';
COMMENT ON COLUMN serving_digital_assets.pos IS 'Position in (updatedAt, assetId) order, from 0.';
COMMENT ON COLUMN serving_digital_assets.updated_us IS 'updatedAt in microseconds since the epoch.';
COMMENT ON COLUMN serving_digital_assets.row_id IS 'rowid of the asset in digital_assets (valid in this snapshot only).';
COMMENT ON TABLE serving_leads IS 'Leads numbered in the contract''s order, for the read API''s paging.';
COMMENT ON COLUMN serving_leads.pos IS 'Position in (CreatedDate, Id) order, from 0.';
COMMENT ON COLUMN serving_leads.created_us IS 'CreatedDate in microseconds since the epoch.';
COMMENT ON COLUMN serving_leads.id IS 'Lead Id.';
COMMENT ON COLUMN serving_leads.row_id IS 'rowid of the lead in leads (valid in this snapshot only).';
