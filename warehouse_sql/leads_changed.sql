-- Queue the details of leads in an incoming batch (registered as `incoming_rows`) that are
-- new, whose list item changed, or whose details were never fetched. Run before the upsert.
INSERT OR IGNORE INTO lead_detail_queue
SELECT i.id
FROM incoming_rows AS i
LEFT JOIN leads AS l ON l.id = i.id
LEFT JOIN lead_details AS d ON d.id = i.id
WHERE l.id IS NULL OR l.record::VARCHAR <> i.record OR d.id IS NULL;
