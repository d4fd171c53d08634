-- What the sync keeps between runs, beside the rows it covers.

-- name: tables
-- One value per key, each written in the same transaction as the rows it covers: a stream's
-- resume point (under its asset's name), a page walk's progress (`.page_walk`), what a whole
-- list last stored (`.content`) and its schema-drift counts (`.drift`), the digest of the
-- requests a derived stream last fetched (`.derived`), and the digest of the DDL last applied
-- (`warehouse.schema`).
CREATE TABLE IF NOT EXISTS sync_state (
    key          VARCHAR PRIMARY KEY,
    value        JSON NOT NULL,         -- e.g. {"updatedAt": "...", "assetId": "..."}
    updated_at   TIMESTAMPTZ NOT NULL
);

-- name: comments
COMMENT ON TABLE sync_state IS 'What the sync keeps between runs, each value written with the rows it covers: resume points of incremental streams (under the asset name), a page walk''s progress (`.page_walk`), what whole lists last stored (`.content`) and their schema-drift counts (`.drift`), the requests a derived stream last fetched (`.derived`), and the digest of the DDL last applied (`warehouse.schema`).';
COMMENT ON COLUMN sync_state.key IS 'What the value is of: an asset name, with a suffix for anything but its resume point.';
COMMENT ON COLUMN sync_state.value IS 'The value (JSON): where the next incremental run resumes, or a list''s digest and row count, and so on.';
COMMENT ON COLUMN sync_state.updated_at IS 'When the value was last written.';

-- name: upsert
-- Set one value (parameters: key, value JSON).
INSERT OR REPLACE INTO sync_state VALUES (?, ?, now());

-- name: read
SELECT value FROM sync_state WHERE key = ?;

-- name: clear
DELETE FROM sync_state WHERE key = ?;
