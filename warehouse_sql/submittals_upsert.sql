-- Upsert fetched submittals (registered as `incoming_rows`).
INSERT OR REPLACE INTO submittals BY NAME SELECT * FROM incoming_rows;
