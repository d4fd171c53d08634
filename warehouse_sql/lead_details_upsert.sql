-- Upsert a batch of lead details (registered as `incoming_rows`).
INSERT OR REPLACE INTO lead_details BY NAME SELECT * FROM incoming_rows;
