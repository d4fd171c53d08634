-- What the mirror remembers: every publish, every version of every row it published, and every
-- change of every stream's records. Kept in the schema `history` of the warehouse (so that a
-- publish's content fingerprint, which reads `main` only, does not see it) and copied into every
-- snapshot with the rest. Written by a publish only, in one transaction, before the copy.

-- name: tables
CREATE SCHEMA IF NOT EXISTS history;

-- One row per publish that made a new snapshot: `seq` orders them, `version` names the snapshot.
CREATE TABLE IF NOT EXISTS history.publishes (
    seq           BIGINT PRIMARY KEY,
    version       VARCHAR NOT NULL,
    published_at  TIMESTAMPTZ NOT NULL
);

-- A random name of this mirror, made at its first publish: the changes feed's tokens carry a
-- check keyed with it, so a token this mirror did not issue is told apart.
CREATE TABLE IF NOT EXISTS history.mirror (
    id  VARCHAR NOT NULL
);

-- Each stream's current records: the hash of each record's JSON and the publish since which it
-- is as it is. A key absent here is absent upstream (or was never seen). One row per (stream,
-- key) by construction (the publish removes a key before it adds it again), without a primary
-- key: its index would have to fit in memory whole when a publish adds every key of a large
-- list, which the sync's memory limit does not allow (1.6 million keys need more than 128 MB).
CREATE TABLE IF NOT EXISTS history.feed_state (
    stream       VARCHAR NOT NULL,
    key          VARCHAR NOT NULL,
    record_hash  UBIGINT NOT NULL,
    since        BIGINT NOT NULL
);

-- Every change of every stream's records, one row per key and publish: `deleted` when the
-- publish no longer had the key. Appended in publish order.
CREATE TABLE IF NOT EXISTS history.feed_log (
    stream   VARCHAR NOT NULL,
    seq      BIGINT NOT NULL,
    key      VARCHAR NOT NULL,
    deleted  BOOLEAN NOT NULL
);

-- The streams kept shorter than the rest (`DUCTWORK_HISTORY_DAYS_<STREAM>`): the oldest publish
-- each one's history still keeps. The feed and the past refuse (410) a token or an instant of
-- such a stream from before it, as they do for the whole history before its oldest publish.
CREATE TABLE IF NOT EXISTS history.horizons (
    stream  VARCHAR NOT NULL,
    seq     BIGINT NOT NULL
);

-- name: comments
COMMENT ON TABLE history.publishes IS 'Every publish that made a new snapshot: its sequence number, version and time. The oldest kept bounds how far back the past can be asked for.';
COMMENT ON COLUMN history.publishes.seq IS 'Publish sequence number, from 1.';
COMMENT ON COLUMN history.publishes.version IS 'The snapshot''s version.';
COMMENT ON COLUMN history.publishes.published_at IS 'When it was published.';
COMMENT ON TABLE history.mirror IS 'This mirror''s random name, with which its changes tokens are checked.';
COMMENT ON COLUMN history.mirror.id IS 'The name (random hex).';
COMMENT ON TABLE history.feed_state IS 'Each stream''s current records: the hash of the record''s JSON and the publish since which it is so.';
COMMENT ON COLUMN history.feed_state.stream IS 'Stream name.';
COMMENT ON COLUMN history.feed_state.key IS 'The record''s key, as the changes feed names it.';
COMMENT ON COLUMN history.feed_state.record_hash IS 'Hash of the record''s JSON.';
COMMENT ON COLUMN history.feed_state.since IS 'The publish (seq) since which the record is as it is.';
COMMENT ON TABLE history.feed_log IS 'Every change of every stream''s records, one row per key and publish that changed it.';
COMMENT ON COLUMN history.feed_log.stream IS 'Stream name.';
COMMENT ON COLUMN history.feed_log.seq IS 'The publish (seq) that changed it.';
COMMENT ON COLUMN history.feed_log.key IS 'The record''s key.';
COMMENT ON COLUMN history.feed_log.deleted IS 'True when that publish no longer had the record.';
COMMENT ON TABLE history.horizons IS 'Streams whose history is kept shorter than the others: the oldest publish each still keeps.';
COMMENT ON COLUMN history.horizons.stream IS 'Stream name.';
COMMENT ON COLUMN history.horizons.seq IS 'The oldest publish (seq) of the stream''s history kept.';

-- name: head
-- The latest publish the warehouse recorded.
SELECT seq, version FROM history.publishes ORDER BY seq DESC LIMIT 1;

-- name: first_kept
-- The oldest publish the history still keeps (NULL before any): a feed token before it is
-- refused (410).
SELECT min(seq) FROM history.publishes;

-- name: record_publish
INSERT INTO history.publishes VALUES (?, ?, ?);

-- name: mirror_id
SELECT id FROM history.mirror LIMIT 1;

-- name: set_mirror_id
INSERT INTO history.mirror VALUES (?);

-- name: feed_now
-- A stream's records now (the temp table `feed_now`, from its `feed` statement), against its
-- recorded state: every key whose record is new, changed or gone, logged as changed by this
-- publish (parameters: stream, seq).
INSERT INTO history.feed_log
SELECT $stream, $seq, coalesce(n.key, s.key), n.key IS NULL
FROM feed_now AS n
FULL JOIN (SELECT key, record_hash FROM history.feed_state WHERE stream = $stream) AS s
    ON s.key = n.key
WHERE n.record_hash IS DISTINCT FROM s.record_hash
ORDER BY coalesce(n.key, s.key);

-- name: feed_now_of_keys
-- As `feed_now`, for the keys of the temp table `feed_keys` only (a stream's `changed_keys`,
-- those whose record may have changed): `feed_now` holds just their records, and the state of
-- every other key is the one recorded.
INSERT INTO history.feed_log
SELECT $stream, $seq, coalesce(n.key, s.key), n.key IS NULL
FROM feed_now AS n
FULL JOIN (
    SELECT key, record_hash FROM history.feed_state
    WHERE stream = $stream AND key IN (SELECT key FROM feed_keys)
) AS s
    ON s.key = n.key
WHERE n.record_hash IS DISTINCT FROM s.record_hash
ORDER BY coalesce(n.key, s.key);

-- name: feed_state_forget
-- The recorded state follows the log: keys changed or gone are removed...
DELETE FROM history.feed_state
WHERE stream = $stream AND key IN (SELECT key FROM history.feed_log WHERE stream = $stream AND seq = $seq);

-- name: feed_state_add
-- ...and keys new or changed come back with this publish.
INSERT INTO history.feed_state
SELECT $stream, n.key, n.record_hash, $seq
FROM feed_now AS n
WHERE n.key IN (SELECT key FROM history.feed_log WHERE stream = $stream AND seq = $seq AND NOT deleted);

-- name: oldest_kept
-- The oldest publish still to be kept: the newest one at or before the cutoff (whoever asks
-- for an instant after the cutoff gets the snapshot current then), or the first one.
SELECT coalesce(max(seq) FILTER (WHERE published_at <= ?), min(seq)) FROM history.publishes;

-- name: prune_publishes
DELETE FROM history.publishes WHERE seq < ?;

-- name: prune_feed_log
-- Changes before the oldest publish kept: a token from before it is refused (410) anyway.
DELETE FROM history.feed_log WHERE seq <= ?;

-- name: horizon
-- A stream's recorded horizon (none when it keeps the default history).
SELECT seq FROM history.horizons WHERE stream = ?;

-- name: drop_horizon
DELETE FROM history.horizons WHERE stream = ?;

-- name: set_horizon
-- A stream's new horizon: the oldest publish its history keeps (after `drop_horizon`).
INSERT INTO history.horizons VALUES (?, ?);

-- name: prune_stream_feed_log
-- One stream's changes up to its horizon (parameters: stream, seq).
DELETE FROM history.feed_log WHERE stream = $stream AND seq <= $seq;

-- name: prune_horizons
-- Horizons the whole history has reached: they tell nothing any more.
DELETE FROM history.horizons WHERE seq <= ?;

-- name: macros
-- The publish current at an instant (NULL before the first kept): what the `*_as_of` macros take.
CREATE OR REPLACE MACRO publish_seq(instant) AS
    (SELECT max(seq) FROM history.publishes WHERE published_at <= instant);
