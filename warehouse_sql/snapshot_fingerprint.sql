-- The content fingerprint a snapshot was published with (read from the snapshot itself).
SELECT content_fingerprint FROM snapshot_info;
