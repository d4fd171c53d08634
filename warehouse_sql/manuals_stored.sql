-- The manuals listing as last stored: each object's ETag and LastModified decide whether its
-- content type must be asked for again, and the records whether the listing changed at all
-- (see internal.py, `internal_manuals`).
SELECT key, etag, last_modified, content_type, record::VARCHAR
FROM manuals;
