-- Forgetting a person (`ductwork forget`): the suppressions that keep erased records out of
-- every later sync, and the statements that erase a stream's keys from the mirror's memory.
-- The keys to erase are registered as `erased_keys` (one column, `key`). A stream's own tables
-- are erased by its file's `erase` section; the statements here work on any stream.

-- name: tables
-- In a schema of its own, which no publish makes: the content fingerprint reads `main` only
-- (a suppression alone publishes nothing), and the copy into a snapshot drops it (see
-- `ductwork.snapshots.guard.drop_strays`), so the suppressed keys stay in the working warehouse.
CREATE SCHEMA IF NOT EXISTS erasure;

CREATE TABLE IF NOT EXISTS erasure.suppressions (
    stream  VARCHAR NOT NULL,
    key     VARCHAR NOT NULL,
    since   TIMESTAMPTZ NOT NULL
);

-- name: suppress
-- Suppress the keys of `erased_keys` in stream `$stream` (a key suppressed already stays so).
INSERT INTO erasure.suppressions
SELECT DISTINCT $stream, e.key, now()
FROM erased_keys AS e
WHERE NOT EXISTS (
    SELECT 1 FROM erasure.suppressions AS s WHERE s.stream = $stream AND s.key = e.key
);

-- name: lift
-- Lift the suppression of the keys of `erased_keys` in stream `$stream`.
DELETE FROM erasure.suppressions
WHERE stream = $stream AND key IN (SELECT key FROM erased_keys);

-- name: suppressed
-- The suppressed keys of stream `$stream` among the list parameter `$keys`.
SELECT key FROM erasure.suppressions
WHERE stream = $stream AND key IN (SELECT unnest($keys::VARCHAR[]))
ORDER BY key;

-- name: feed_log_forget
-- The keys' every record in the changes feed's log (and, next, its state): a walk from any
-- earlier token then knows of them only the delete a publish logs (`feed_delete`).
DELETE FROM history.feed_log WHERE stream = $stream AND key IN (SELECT key FROM erased_keys);

-- name: feed_state_forget
DELETE FROM history.feed_state WHERE stream = $stream AND key IN (SELECT key FROM erased_keys);

-- name: feed_delete
-- Log the keys as gone in publish `$seq`, with no record: every walk from a token before it
-- shows each key once, as a `delete`. Run inside the publish's transaction, after
-- `feed_forget`.
INSERT INTO history.feed_log
SELECT DISTINCT $stream, $seq, key, true FROM erased_keys;

-- name: feed_rows
-- How many rows of the feed's log and state name the keys in stream `$stream`.
SELECT
    (SELECT count(*) FROM history.feed_log
     WHERE stream = $stream AND key IN (SELECT key FROM erased_keys)),
    (SELECT count(*) FROM history.feed_state
     WHERE stream = $stream AND key IN (SELECT key FROM erased_keys));
