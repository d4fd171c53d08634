-- The leads of an incoming batch (registered as `incoming_rows`) that are new or whose list
-- item differs from the stored one: only these are upserted and versioned, so re-reading the
-- recent window writes nothing when nothing changed. $lo and $hi bound the stored leads
-- compared, as in leads_changed.sql; a lead whose CreatedDate moved is upserted as a change.
SELECT i.*
FROM incoming_rows AS i
LEFT JOIN (
    SELECT id, record FROM leads
    WHERE created_at BETWEEN $lo AND $hi OR created_at IS NULL
) AS l ON l.id = i.id
WHERE l.id IS NULL OR l.record::VARCHAR <> i.record;
