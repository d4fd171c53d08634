-- The one-row table that says which snapshot this is (parameters: version, content fingerprint).
CREATE TABLE snapshot_info AS
SELECT ?::VARCHAR AS version, now() AS published_at, ?::VARCHAR AS content_fingerprint;
