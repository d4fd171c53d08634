-- Internal family: contractors with reviews, indoor models, the manuals listing and the
-- product images mirrored into the object store.

-- The contractors answer as received: `data` is a JSON text, kept verbatim.
CREATE TABLE IF NOT EXISTS contractors_raw (
    body        JSON NOT NULL,
    parse_error VARCHAR,                 -- why `data` could not be parsed, if it could not
    synced_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS contractors (
    contractor_id  VARCHAR PRIMARY KEY,
    name           VARCHAR,
    city           VARCHAR,
    state          VARCHAR,
    rating         DOUBLE,
    record         JSON NOT NULL,
    synced_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS contractor_reviews (
    review_id      VARCHAR NOT NULL,
    contractor_id  VARCHAR NOT NULL,
    rating         DOUBLE,
    text           VARCHAR,
    created_at     TIMESTAMPTZ,
    record         JSON NOT NULL,
    synced_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (contractor_id, review_id)
);

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

-- Objects under `manuals/` in the bucket, as /internal/v1.0/digital-assets lists them.
CREATE TABLE IF NOT EXISTS manuals (
    key            VARCHAR PRIMARY KEY,
    size_bytes     BIGINT,
    last_modified  TIMESTAMPTZ,
    etag           VARCHAR,
    content_type   VARCHAR,
    url            VARCHAR,
    record         JSON NOT NULL,        -- the listing item exactly as served
    synced_at      TIMESTAMPTZ NOT NULL
);

-- Product images copied into the bucket under images/<sku>/.
CREATE TABLE IF NOT EXISTS product_images (
    source_url     VARCHAR PRIMARY KEY,
    sku            VARCHAR NOT NULL,
    kind           VARCHAR,
    object_key     VARCHAR,
    md5            VARCHAR,
    size_bytes     BIGINT,
    status         VARCHAR NOT NULL,     -- uploaded, unchanged or failed
    error          VARCHAR,
    synced_at      TIMESTAMPTZ NOT NULL
);
