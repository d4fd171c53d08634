-- Bookkeeping of the sync itself.

-- One row per completed load of a table: what the upstream reported and what was written.
CREATE TABLE IF NOT EXISTS sync_log (
    stream         VARCHAR NOT NULL,
    finished_at    TIMESTAMPTZ NOT NULL,
    rows_written   BIGINT NOT NULL,
    reported_total BIGINT,
    requests       BIGINT,
    retries        BIGINT
);

-- Bookmarks of incremental streams, written in the same transaction as the rows they cover.
CREATE TABLE IF NOT EXISTS stream_state (
    stream       VARCHAR PRIMARY KEY,
    bookmark     JSON NOT NULL,         -- e.g. {"updatedAt": "...", "assetId": "..."}
    updated_at   TIMESTAMPTZ NOT NULL
);
