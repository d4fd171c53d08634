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
