-- The stored record of each lead in the list parameter of ids that also has its details: what a
-- re-read page of leads is compared with before it is stored (see crm.py, `_stored_as_read`).
SELECT l.id, l.record::VARCHAR
FROM leads AS l
WHERE l.id IN (SELECT unnest(?::VARCHAR[]))
  AND l.id IN (SELECT id FROM lead_details);
