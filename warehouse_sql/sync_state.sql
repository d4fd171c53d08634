-- Bookkeeping of the sync itself.

-- Bookmarks of incremental streams, written in the same transaction as the rows they cover.
CREATE TABLE IF NOT EXISTS stream_state (
    stream       VARCHAR PRIMARY KEY,
    bookmark     JSON NOT NULL,         -- e.g. {"updatedAt": "...", "assetId": "..."}
    updated_at   TIMESTAMPTZ NOT NULL
);
