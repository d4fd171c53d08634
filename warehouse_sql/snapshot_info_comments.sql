-- Comments of the table every published snapshot gets (created in ductwork/snapshots/publishing.py).
COMMENT ON TABLE snapshot_info IS 'Which snapshot this is: one row with its version and publish time.';
COMMENT ON COLUMN snapshot_info.version IS 'Snapshot version (sortable UTC time plus a random tail).';
COMMENT ON COLUMN snapshot_info.published_at IS 'When the snapshot was published.';
COMMENT ON COLUMN snapshot_info.content_fingerprint IS 'Row counts and row-hash sums of every table (run-time columns left out) and a digest of the publishing SQL: a sync whose warehouse gives the same fingerprint publishes no new snapshot.';
