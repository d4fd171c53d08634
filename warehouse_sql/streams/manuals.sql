-- The manuals stream: the bucket's manuals/ objects, as /internal/v1.0/digital-assets lists them.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
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

-- name: comments
COMMENT ON TABLE manuals IS 'Objects under manuals/ in the bucket, as /internal/v1.0/digital-assets lists them.';
COMMENT ON COLUMN manuals.key IS 'Object key.';
COMMENT ON COLUMN manuals.size_bytes IS 'Object size.';
COMMENT ON COLUMN manuals.last_modified IS 'Object last-modified time.';
COMMENT ON COLUMN manuals.etag IS 'Object ETag.';
COMMENT ON COLUMN manuals.content_type IS 'Content type.';
COMMENT ON COLUMN manuals.url IS 'Object URL.';
COMMENT ON COLUMN manuals.record IS 'The listing item exactly as served (JSON).';
COMMENT ON COLUMN manuals.synced_at IS 'When the sync stored the row.';

-- name: stored
-- The manuals listing as last stored: each object's ETag and LastModified decide whether its
-- content type must be asked for again, and the records whether the listing changed at all
-- (see internal.py, `internal_manuals`).
SELECT key, etag, last_modified, content_type, record::VARCHAR
FROM manuals;

-- name: served
-- The answer the read API gives: every listing item, in key order (S3's listing order).
SELECT '{"success":true,"data":[' || coalesce(string_agg(record::VARCHAR, ',' ORDER BY key), '') || ']}'
FROM manuals;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now), by
-- object key.
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `manuals_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO manuals_as_of(v) AS TABLE
SELECT key, record FROM manuals_at(v);
