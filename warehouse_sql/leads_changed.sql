-- Queue the details of leads in an incoming batch (registered as `incoming_rows`) that are
-- new, whose list item changed, or whose details were never fetched. Run before the upsert.
-- $lo and $hi are the batch's earliest and latest CreatedDate: stored leads outside them
-- cannot share an id with the batch unless their CreatedDate changed, and such a lead is
-- then taken for new, which queues it again, as a change would. The bound lets the scan skip
-- the record column of every other lead (a page of a window re-read: about 40 ms to 9 ms).
INSERT INTO lead_detail_queue
SELECT DISTINCT i.id
FROM incoming_rows AS i
LEFT JOIN (
    SELECT id, record FROM leads
    WHERE created_at BETWEEN $lo AND $hi OR created_at IS NULL
) AS l ON l.id = i.id
LEFT JOIN lead_details AS d ON d.id = i.id
WHERE (l.id IS NULL OR l.record::VARCHAR <> i.record OR d.id IS NULL)
  -- NOT EXISTS, not NOT IN: the same ids (the queue holds no NULL), without NOT IN's NULL
  -- bookkeeping over the whole queue (at 500,000 queued, 0.04 s a batch against 0.02 s).
  AND NOT EXISTS (SELECT 1 FROM lead_detail_queue AS q WHERE q.id = i.id);
