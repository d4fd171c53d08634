-- Upsert a batch of lead list items (registered as `incoming_rows`, one row per id). Deleted and
-- inserted anew rather than replaced in place, for the reason given in digital_assets_upsert.sql.
DELETE FROM leads WHERE id IN (SELECT id FROM incoming_rows);

INSERT INTO leads BY NAME SELECT * FROM incoming_rows;
