-- Warehouse family: digital assets (incremental on updatedAt) and submittal data.

-- Every digital asset ever listed. Deletions upstream are not announced: a reconciliation
-- that no longer finds an asset sets `deleted_at`; rows are never hard-deleted.
CREATE TABLE IF NOT EXISTS digital_assets (
    asset_id         VARCHAR PRIMARY KEY,
    sku              VARCHAR,
    asset_type       VARCHAR,        -- Manual, Brochure, Spec Sheet, Submittal, Image, Video
    title            VARCHAR,
    url              VARCHAR,
    mime_type        VARCHAR,
    language         VARCHAR,
    file_size_bytes  BIGINT,
    created_at       TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ,
    updated_at_text  VARCHAR,        -- updatedAt exactly as received (the bookmark: its UTC form)
    record           JSON NOT NULL,
    deleted_at       TIMESTAMPTZ,
    synced_at        TIMESTAMPTZ NOT NULL
);

-- One submittal per (idu, odu): a Pairing's P1/P2 SRNs, or a Standalone unit's SRN alone.
CREATE TABLE IF NOT EXISTS submittals (
    request_key      VARCHAR PRIMARY KEY,   -- 'idu|odu' with empty text for an absent side
    idu              VARCHAR,
    odu              VARCHAR,
    found            BOOLEAN NOT NULL,      -- false when the upstream answered 404
    ahri_number      VARCHAR,
    document_url     VARCHAR,
    updated_at       TIMESTAMPTZ,
    source_signature VARCHAR,               -- what the request was derived from; refetch on change
    record           JSON,                  -- the whole response body as received
    synced_at        TIMESTAMPTZ NOT NULL
);

-- Type-2 history of digital assets: one row per version, opened when an asset is first listed
-- or changes, closed (valid_to, is_current = false) by its next version or by its deletion.
-- Written in the transactions that upsert `digital_assets` and mark deletions.
CREATE TABLE IF NOT EXISTS digital_asset_history (
    asset_id         VARCHAR NOT NULL,
    valid_from       TIMESTAMPTZ NOT NULL,
    valid_to         TIMESTAMPTZ,            -- NULL while current
    is_current       BOOLEAN NOT NULL,
    sku              VARCHAR,
    asset_type       VARCHAR,
    title            VARCHAR,
    url              VARCHAR,
    mime_type        VARCHAR,
    language         VARCHAR,
    file_size_bytes  BIGINT,
    updated_at       TIMESTAMPTZ,
    record_hash      VARCHAR NOT NULL        -- md5 of the record as received
);
