-- Upsert a batch of lead list items (registered as `incoming_rows`).
INSERT OR REPLACE INTO leads BY NAME SELECT * FROM incoming_rows;
