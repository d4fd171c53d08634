-- Reading the changes feed from a snapshot's history (see ductwork/history/feed.py). `{records}`
-- is a stream's `<stream>_as_of` macro; a walk is pinned to publish `$pin` and lists entries by
-- (version, key) after `($after_version, $after_key)`, `$limit` at a time. A version is the
-- publish that last changed a key, no earlier than the oldest publish kept (`$oldest`): the log
-- of changes up to it is dropped.

-- name: publishes
SELECT seq, version, published_at FROM history.publishes ORDER BY seq;

-- name: horizons
-- The streams kept shorter than the rest, each with the oldest publish its history keeps.
SELECT stream, seq FROM history.horizons;

-- name: current
-- The initial load, pinned to the newest publish: every current record of the stream.
SELECT key, version FROM (
    SELECT key, greatest(since, $oldest) AS version
    FROM history.feed_state
    WHERE stream = $stream
)
WHERE (version, key) > ($after_version, $after_key)
ORDER BY version, key
LIMIT $limit;

-- name: loaded_at
-- The initial load, pinned to an older publish: the keys it had, each with the last change at
-- or before it.
SELECT key, version FROM (
    SELECT r.key, greatest(coalesce(l.version, $oldest), $oldest) AS version
    FROM {records}($pin) AS r
    LEFT JOIN (
        SELECT key, max(seq) AS version
        FROM history.feed_log
        WHERE stream = $stream AND seq <= $pin
        GROUP BY key
    ) AS l ON l.key = r.key
)
WHERE (version, key) > ($after_version, $after_key)
ORDER BY version, key
LIMIT $limit;

-- name: changed
-- The net change between publishes `$since` and `$pin`: every key changed in between, with its
-- last change.
SELECT key, version FROM (
    SELECT key, max(seq) AS version
    FROM history.feed_log
    WHERE stream = $stream AND seq > $since AND seq <= $pin
    GROUP BY key
)
WHERE (version, key) > ($after_version, $after_key)
ORDER BY version, key
LIMIT $limit;

-- name: records
-- The records of the keys `$keys` at publish `$pin` (NULL: the snapshot's own).
SELECT key, record::VARCHAR FROM {records}($pin) WHERE key IN (SELECT unnest($keys::VARCHAR[]));

-- name: records_since
-- Each current record of stream `$stream` with the publish since which it is as it is: when the
-- mirror first served its content (Last-Modified of a single-record answer).
SELECT key, since FROM history.feed_state WHERE stream = $stream;

-- name: changes_per_publish
-- How many records each publish kept in the history changed, per stream: upserts and deletes.
SELECT p.seq, p.published_at, l.stream,
       count(*) FILTER (WHERE NOT l.deleted) AS upserts,
       count(*) FILTER (WHERE l.deleted) AS deletes
FROM history.feed_log AS l
JOIN history.publishes AS p USING (seq)
GROUP BY ALL
ORDER BY p.seq, l.stream;

-- name: records_per_stream
-- How many current records each stream's history holds.
SELECT stream, count(*) FROM history.feed_state GROUP BY stream ORDER BY stream;

-- name: notifications_after
-- What a subscription has still to be told, oldest first: each publish kept that changed one of
-- the streams `$streams`, after the subscription's cursor (publish `$seq`, and within it the
-- streams up to `$stream`; NULL: all of that publish), with its upserts and deletes.
SELECT l.seq, p.version, l.stream,
       count(*) FILTER (WHERE NOT l.deleted) AS upserts,
       count(*) FILTER (WHERE l.deleted) AS deletes
FROM history.feed_log AS l
JOIN history.publishes AS p USING (seq)
WHERE l.stream IN (SELECT unnest($streams::VARCHAR[]))
  AND (l.seq > $seq OR (l.seq = $seq AND $stream IS NOT NULL AND l.stream > $stream))
GROUP BY ALL
ORDER BY l.seq, l.stream
LIMIT $limit;

-- name: records_since_by_key
-- The same, ordered by key (binary, as Python orders strings): a worker searches it in place.
SELECT key, since FROM history.feed_state WHERE stream = $stream ORDER BY key;

-- name: logged_keys
-- The keys of stream `$stream` that publish `$seq` logged as changed or gone, by key.
SELECT key FROM history.feed_log WHERE stream = $stream AND seq = $seq ORDER BY key;
