-- The leads of an incoming batch (registered as `incoming_rows`) that are new or whose list
-- item differs from the stored one: only these are upserted and versioned, so re-reading the
-- recent window writes nothing when nothing changed.
SELECT i.*
FROM incoming_rows AS i
LEFT JOIN leads AS l ON l.id = i.id
WHERE l.id IS NULL OR l.record::VARCHAR <> i.record;
