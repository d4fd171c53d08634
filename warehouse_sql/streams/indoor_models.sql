-- The indoor-models stream: /internal/v1.0/products/indoor-models, in the upstream's order.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
CREATE TABLE IF NOT EXISTS indoor_models (
    ordinal        INTEGER PRIMARY KEY,  -- position in the upstream's answer
    model          VARCHAR,
    sku            VARCHAR,
    series         VARCHAR,
    family         VARCHAR,
    capacity_btuh  DOUBLE,
    record         JSON NOT NULL,
    synced_at      TIMESTAMPTZ NOT NULL
);

-- name: comments
COMMENT ON TABLE indoor_models IS 'The indoor models list, in the upstream''s order.';
COMMENT ON COLUMN indoor_models.ordinal IS 'Position in the upstream''s answer.';
COMMENT ON COLUMN indoor_models.model IS 'Model name.';
COMMENT ON COLUMN indoor_models.sku IS 'SKU.';
COMMENT ON COLUMN indoor_models.series IS 'Series name.';
COMMENT ON COLUMN indoor_models.family IS 'Family name.';
COMMENT ON COLUMN indoor_models.capacity_btuh IS 'Capacity, BTU/h.';
COMMENT ON COLUMN indoor_models.record IS 'The item exactly as received (JSON).';
COMMENT ON COLUMN indoor_models.synced_at IS 'When the sync stored the row.';

-- name: served
-- The answer the read API gives: every model's record, in the upstream's order.
SELECT '{"success":true,"data":[' || coalesce(string_agg(record::VARCHAR, ',' ORDER BY ordinal), '') || ']}'
FROM indoor_models;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now), by
-- SKU (the first of a SKU listed twice, in the upstream's order).
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `indoor_models_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO indoor_models_as_of(v) AS TABLE
SELECT sku AS key, first(record ORDER BY ordinal) AS record
FROM indoor_models_at(v)
WHERE sku IS NOT NULL
GROUP BY sku;
