-- The products stream: the catalog list (/products/v2.0/products) and the six typed unit lists.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
CREATE TABLE IF NOT EXISTS catalog_items (
    sku        VARCHAR PRIMARY KEY,
    srn        VARCHAR,
    unit_type  VARCHAR,          -- route slug, e.g. 'indoor-units'
    href       VARCHAR,          -- _links.self.href as received (SKU percent-encoded)
    record     JSON NOT NULL,
    synced_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS units (
    unit_type    VARCHAR NOT NULL,   -- the typed list the record came from
    sku          VARCHAR NOT NULL,
    srn          VARCHAR,
    brand        VARCHAR,
    category     VARCHAR,            -- INDOOR or OUTDOOR
    subcategory  VARCHAR,
    series_name  VARCHAR,
    family_name  VARCHAR,
    description  VARCHAR,
    status       VARCHAR,            -- Active or Discontinued
    updated_at   TIMESTAMPTZ,
    record       JSON NOT NULL,
    synced_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (unit_type, sku)
);

-- name: comments
COMMENT ON TABLE catalog_items IS 'The product list (/products/v2.0/products): one row per SKU.';
COMMENT ON COLUMN catalog_items.sku IS 'Product SKU (brand model number).';
COMMENT ON COLUMN catalog_items.srn IS 'Product SRN.';
COMMENT ON COLUMN catalog_items.unit_type IS 'Route slug of the typed unit list, e.g. indoor-units.';
COMMENT ON COLUMN catalog_items.href IS '_links.self.href as received (SKU percent-encoded).';
COMMENT ON COLUMN catalog_items.record IS 'The list item exactly as received (JSON).';
COMMENT ON COLUMN catalog_items.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE units IS 'Full unit records of the six typed unit lists (indoor, outdoor, branch controllers, branch boxes, ventilation, accessories).';
COMMENT ON COLUMN units.unit_type IS 'The typed list the record came from, e.g. outdoor-units.';
COMMENT ON COLUMN units.sku IS 'Unit SKU.';
COMMENT ON COLUMN units.srn IS 'Unit SRN (used by submittal requests).';
COMMENT ON COLUMN units.brand IS 'Brand name.';
COMMENT ON COLUMN units.category IS 'INDOOR or OUTDOOR.';
COMMENT ON COLUMN units.subcategory IS 'Subcategory, e.g. Wall Mounted.';
COMMENT ON COLUMN units.series_name IS 'series.name.';
COMMENT ON COLUMN units.family_name IS 'family.name.';
COMMENT ON COLUMN units.description IS 'Free-text description.';
COMMENT ON COLUMN units.status IS 'Active or Discontinued.';
COMMENT ON COLUMN units.updated_at IS 'The record''s updatedAt.';
COMMENT ON COLUMN units.record IS 'The unit record exactly as received (JSON), with specifications and performance.';
COMMENT ON COLUMN units.synced_at IS 'When the sync stored the row.';

-- name: served_items
-- The catalog list as the read API holds it: every item in SKU order.
SELECT sku, unit_type, record FROM catalog_items ORDER BY sku;

-- name: served_units
-- The unit records as the read API holds them, by type then SKU, with their filter values.
SELECT unit_type, sku, series_name, family_name, brand, record
FROM units
ORDER BY unit_type, sku;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now): each
-- SKU's unit record as /products/v2.0/units/{sku} serves it (a SKU listed under two types is
-- the first type's, in the order the spec lists the types).
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `products_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO products_as_of(v) AS TABLE
SELECT sku AS key, record
FROM units_at(v)
QUALIFY row_number() OVER (
    PARTITION BY sku
    ORDER BY list_position(
        ['indoor-units', 'outdoor-units', 'branch-controllers', 'branch-boxes', 'ventilation',
         'accessories'],
        unit_type
    )
) = 1;
