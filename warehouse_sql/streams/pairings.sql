-- The pairings stream: /products/v2.0/pairings, one row per pairing and one per product slot.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
CREATE TABLE IF NOT EXISTS pairings (
    relationship_id  BIGINT PRIMARY KEY,
    rel_type         VARCHAR,        -- Pairing, Standalone or Combinations
    updated_at       TIMESTAMPTZ,
    record           JSON NOT NULL,
    synced_at        TIMESTAMPTZ NOT NULL
);

-- One row per product slot of a pairing; `sku` may name a product the catalog lacks.
CREATE TABLE IF NOT EXISTS pairing_products (
    relationship_id  BIGINT NOT NULL,
    position         VARCHAR NOT NULL,   -- P1, P2 or P3
    sku              VARCHAR,
    srn              VARCHAR,
    unit_type        VARCHAR,
    PRIMARY KEY (relationship_id, position)
);

-- name: comments
COMMENT ON TABLE pairings IS 'Product relationships (pairings, standalone units, combinations).';
COMMENT ON COLUMN pairings.relationship_id IS 'relationshipId.';
COMMENT ON COLUMN pairings.rel_type IS 'Pairing, Standalone or Combinations.';
COMMENT ON COLUMN pairings.updated_at IS 'The pairing''s updatedAt.';
COMMENT ON COLUMN pairings.record IS 'The pairing exactly as received (JSON).';
COMMENT ON COLUMN pairings.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE pairing_products IS 'One row per product slot of a pairing; the SKU may name a product the catalog lacks.';
COMMENT ON COLUMN pairing_products.relationship_id IS 'The pairing''s relationshipId.';
COMMENT ON COLUMN pairing_products.position IS 'Slot: P1, P2 or P3.';
COMMENT ON COLUMN pairing_products.sku IS 'SKU in the slot.';
COMMENT ON COLUMN pairing_products.srn IS 'SRN in the slot.';
COMMENT ON COLUMN pairing_products.unit_type IS 'Unit list of the product, e.g. indoor-units.';

-- name: views
CREATE OR REPLACE VIEW pairings_expanded AS
WITH slot AS (
    SELECT
        pp.relationship_id,
        pp.position,
        pp.sku,
        pp.unit_type,
        u.series_name,
        u.family_name,
        u.status,
        TRY_CAST(u.record ->> '$.performance.coolingCapacityBtuh' AS DOUBLE) AS cooling_btuh,
        TRY_CAST(u.record ->> '$.performance.heatingCapacityBtuh' AS DOUBLE) AS heating_btuh,
        TRY_CAST(u.record ->> '$.performance.seer2' AS DOUBLE) AS seer2,
        TRY_CAST(u.record ->> '$.performance.hspf2' AS DOUBLE) AS hspf2
    FROM pairing_products AS pp
    LEFT JOIN units AS u ON u.sku = pp.sku AND u.unit_type = pp.unit_type
)
SELECT
    p.relationship_id,
    p.rel_type,
    p.updated_at,
    p1.sku AS p1_sku,
    p1.unit_type AS p1_unit_type,
    p1.series_name AS p1_series,
    p1.family_name AS p1_family,
    p1.status AS p1_status,
    p1.cooling_btuh AS p1_cooling_capacity_btuh,
    p1.heating_btuh AS p1_heating_capacity_btuh,
    p1.seer2 AS p1_seer2,
    p1.hspf2 AS p1_hspf2,
    p2.sku AS p2_sku,
    p2.unit_type AS p2_unit_type,
    p2.series_name AS p2_series,
    p2.family_name AS p2_family,
    p2.status AS p2_status,
    p2.cooling_btuh AS p2_cooling_capacity_btuh,
    p2.heating_btuh AS p2_heating_capacity_btuh,
    p2.seer2 AS p2_seer2,
    p2.hspf2 AS p2_hspf2
FROM pairings AS p
LEFT JOIN slot AS p1 ON p1.relationship_id = p.relationship_id AND p1.position = 'P1'
LEFT JOIN slot AS p2 ON p2.relationship_id = p.relationship_id AND p2.position = 'P2';

COMMENT ON VIEW pairings_expanded IS 'Pairings with both units expanded: series, family, capacity and efficiency of P1 (indoor unit of a Pairing) and P2 (its outdoor unit).';
COMMENT ON COLUMN pairings_expanded.relationship_id IS 'The pairing''s relationshipId.';
COMMENT ON COLUMN pairings_expanded.rel_type IS 'Pairing, Standalone or Combinations.';
COMMENT ON COLUMN pairings_expanded.updated_at IS 'The pairing''s updatedAt.';
COMMENT ON COLUMN pairings_expanded.p1_sku IS 'SKU in slot P1 (a Pairing''s indoor unit).';
COMMENT ON COLUMN pairings_expanded.p1_unit_type IS 'Unit list of the P1 product, e.g. indoor-units.';
COMMENT ON COLUMN pairings_expanded.p1_series IS 'Series name of the P1 unit (NULL when the catalog lacks it).';
COMMENT ON COLUMN pairings_expanded.p1_family IS 'Family name of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_status IS 'Active or Discontinued, for the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_cooling_capacity_btuh IS 'Cooling capacity of the P1 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p1_heating_capacity_btuh IS 'Heating capacity of the P1 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p1_seer2 IS 'Cooling efficiency (SEER2) of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_hspf2 IS 'Heating efficiency (HSPF2) of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p2_sku IS 'SKU in slot P2 (a Pairing''s outdoor unit).';
COMMENT ON COLUMN pairings_expanded.p2_unit_type IS 'Unit list of the P2 product, e.g. outdoor-units.';
COMMENT ON COLUMN pairings_expanded.p2_series IS 'Series name of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_family IS 'Family name of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_status IS 'Active or Discontinued, for the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_cooling_capacity_btuh IS 'Cooling capacity of the P2 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p2_heating_capacity_btuh IS 'Heating capacity of the P2 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p2_seer2 IS 'Cooling efficiency (SEER2) of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_hspf2 IS 'Heating efficiency (HSPF2) of the P2 unit.';

-- Catalog units marked Discontinued that pairings still name.
CREATE OR REPLACE VIEW discontinued_products_in_pairings AS
SELECT
    u.sku,
    u.unit_type,
    u.series_name,
    u.family_name,
    count(DISTINCT pp.relationship_id) AS pairings,
    list(DISTINCT pp.relationship_id ORDER BY pp.relationship_id) AS relationship_ids
FROM units AS u
JOIN pairing_products AS pp ON pp.sku = u.sku AND pp.unit_type = u.unit_type
WHERE u.status = 'Discontinued'
GROUP BY u.sku, u.unit_type, u.series_name, u.family_name;

COMMENT ON VIEW discontinued_products_in_pairings IS 'Discontinued catalog units still referenced by pairings.';
COMMENT ON COLUMN discontinued_products_in_pairings.sku IS 'SKU of the discontinued unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.unit_type IS 'Unit list it belongs to.';
COMMENT ON COLUMN discontinued_products_in_pairings.series_name IS 'Series name of the unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.family_name IS 'Family name of the unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.pairings IS 'How many pairings name it.';
COMMENT ON COLUMN discontinued_products_in_pairings.relationship_ids IS 'The relationshipIds of those pairings.';

-- name: skus_missing
-- SKUs named by pairings that the product catalog does not hold.
SELECT DISTINCT pp.sku
FROM pairing_products AS pp
LEFT JOIN catalog_items AS c ON c.sku = pp.sku
WHERE pp.sku IS NOT NULL AND c.sku IS NULL
ORDER BY pp.sku;

-- name: served
-- The pairings as the read API holds them, in relationshipId order.
SELECT relationship_id, rel_type, record FROM pairings ORDER BY relationship_id;

-- name: served_skus
-- The SKUs each pairing names, for the list's `sku` filter.
SELECT relationship_id, sku FROM pairing_products WHERE sku IS NOT NULL;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now), by
-- relationshipId.
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `pairings_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO pairings_as_of(v) AS TABLE
SELECT relationship_id::VARCHAR AS key, record FROM pairings_at(v);
