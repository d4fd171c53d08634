-- Product catalog: /products/v2.0/products, the six typed unit lists and the pairings.
-- Every table keeps the record exactly as received (`record`, JSON) beside typed columns,
-- so members the contract does not name survive the round trip to the read API.

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
