-- What a publish runs to record itself in the warehouse's `history` schema
-- (`ductwork.history.recording`), besides the shared statements of `history.sql`. The current
-- snapshot's file is attached read-only as `previous_snapshot`.
--
-- Templates: `{table}` is a versioned table's quoted name, `{since}`, `{changed}` and
-- `{now_hashes}` the quoted names of its companion tables (its name with `__since`, `__changed`
-- or `__now_hashes` after it), `{macro}` a macro's quoted name. The rest are built from those
-- names: `{keys}` the table's key columns (`"a", "b"`), `{key_columns}` the same each followed
-- by a comma (nothing for a table without a key), `{coalesced_keys}` each key column as the
-- current row's or else the recorded one's (`coalesce(n."a", s."a") AS "a"`), `{row_hash}` the expression hashing a row's
-- content, `{match}` a join on the key columns, `{current}` a `current_rows` query and
-- `{records}` a stream's records query. Values travel as parameters.

-- name: attach_previous
ATTACH ? AS previous_snapshot (READ_ONLY);

-- name: detach_previous
DETACH previous_snapshot;

-- name: current_database
SELECT current_database();

-- name: history_tables
-- The tables of the `history` schema of a database (the warehouse, or `previous_snapshot`).
SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'history';

-- name: main_tables
SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main';

-- name: columns_by_table
-- The columns of every table of the `main` schema of the database in use, in order.
SELECT table_name, list(column_name ORDER BY column_index)
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main'
GROUP BY table_name;

-- name: live_head
-- The latest publish the current snapshot's history recorded.
SELECT seq, version FROM previous_snapshot.history.publishes ORDER BY seq DESC LIMIT 1;

-- name: drop_history_table
DROP TABLE history.{table};

-- name: copy_shared_table
-- A shared table of the history (made anew by `history.sql`), filled from the current
-- snapshot's.
INSERT INTO history.{table} SELECT * FROM previous_snapshot.history.{table};

-- name: copy_table
-- A table of one versioned table's history, copied whole from the current snapshot.
CREATE TABLE history.{table} AS SELECT * FROM previous_snapshot.history.{table};

-- name: history_table
-- A table's closed versions: its columns, and the publishes each version was valid from and
-- until (the one that ended it).
CREATE TABLE IF NOT EXISTS history.{table} AS
SELECT *, NULL::BIGINT AS valid_from, NULL::BIGINT AS valid_to FROM main.{table} LIMIT 0;

-- name: since_table
-- A table's current rows' publishes: each row's key (for a table without one, its hash), its
-- hash and the publish since which it is as it is.
CREATE TABLE IF NOT EXISTS history.{since} AS
SELECT {key_columns}{row_hash} AS row_hash, NULL::BIGINT AS since FROM main.{table} LIMIT 0;

-- name: current_rows
-- A table's current rows, hashed: their keys and `row_hash` (a query, inside others).
SELECT {key_columns}row_hash
FROM (SELECT {key_columns}{row_hash} AS row_hash FROM main.{table})

-- name: current_rows_hashed
-- As `current_rows`, from the temp table that `hash_now` filled.
SELECT {key_columns}row_hash FROM {now_hashes}

-- name: hash_now
CREATE OR REPLACE TEMP TABLE {now_hashes} AS {current};

-- name: row_changes
-- The rows whose hash differs from their key's recorded one (new, changed or gone): one pass,
-- a full join of the current rows' hashes with the table's `__since` table.
CREATE OR REPLACE TEMP TABLE row_changes AS
SELECT {coalesced_keys}, n.row_hash AS now_hash, s.row_hash AS since_hash, s.since
FROM ({current}) AS n
FULL JOIN history.{since} AS s ON {match}
WHERE n.row_hash IS DISTINCT FROM s.row_hash;

-- name: ended_by_key
-- The changed or gone rows' recorded hashes and publishes...
CREATE OR REPLACE TEMP TABLE ended_rows AS
SELECT {keys}, since_hash AS row_hash, since FROM row_changes WHERE since_hash IS NOT NULL;

-- name: arrived_by_key
-- ...and the new or changed rows' hashes.
CREATE OR REPLACE TEMP TABLE arrived_rows AS
SELECT {keys}, now_hash AS row_hash FROM row_changes WHERE now_hash IS NOT NULL;

-- name: changed_keys
-- The keys of the rows that changed or went: what a stream's `changed_keys` section reads.
CREATE OR REPLACE TEMP TABLE {changed} AS SELECT {keys} FROM row_changes;

-- name: no_changed_keys
-- No key changed (the table's content is the current snapshot's).
CREATE OR REPLACE TEMP TABLE {changed} AS SELECT {keys} FROM main.{table} LIMIT 0;

-- name: now_rows
-- A table without a key: its rows are compared by their hashes, a row whose content changed
-- being one row gone and another new.
CREATE OR REPLACE TEMP TABLE now_rows AS {current};

-- name: ended_by_hash
CREATE OR REPLACE TEMP TABLE ended_rows AS
SELECT s.* FROM history.{since} AS s
WHERE NOT EXISTS (SELECT 1 FROM now_rows AS n WHERE n.row_hash = s.row_hash);

-- name: arrived_by_hash
CREATE OR REPLACE TEMP TABLE arrived_rows AS
SELECT n.* FROM now_rows AS n
WHERE NOT EXISTS (SELECT 1 FROM history.{since} AS s WHERE s.row_hash = n.row_hash);

-- name: close_by_hash
-- The ended rows of a table without a key, as the current snapshot has them, become closed
-- versions, valid until this publish (parameter: seq).
INSERT INTO history.{table} BY NAME
SELECT p.*, e.since AS valid_from, $seq AS valid_to
FROM previous_snapshot.main.{table} AS p
JOIN ended_rows AS e ON {row_hash} = e.row_hash;

-- name: ended_at
-- The ended rows of a table with a key, found by their keys alone: a join on the keys reads
-- every column of every row, though few rows ended in most publishes...
CREATE OR REPLACE TEMP TABLE ended_at AS
SELECT p.rowid AS row_id, e.since
FROM previous_snapshot.main.{table} AS p
JOIN ended_rows AS e ON {match};

-- name: close_ended_at
-- ...then only they are read whole, and become closed versions (parameter: seq).
INSERT INTO history.{table} BY NAME
SELECT p.*, a.since AS valid_from, $seq AS valid_to
FROM previous_snapshot.main.{table} AS p
JOIN ended_at AS a ON p.rowid = a.row_id;

-- name: forget_ended
-- The recorded publishes of the rows that changed or went are dropped...
DELETE FROM history.{since} AS s WHERE EXISTS (SELECT 1 FROM ended_rows AS e WHERE {match});

-- name: add_arrived
-- ...and the rows new or changed are as they are since this publish (parameter: seq).
INSERT INTO history.{since} BY NAME SELECT *, $seq AS since FROM arrived_rows;

-- name: table_at
-- `<table>_at(v)`: the table's rows at publish `v` (NULL: now), from its closed versions and
-- its current rows that were already so then. COLUMNS rather than EXCLUDE: DuckDB prints an
-- EXCLUDE list in no fixed order, and a reader compares the macro's text with the one a
-- publish makes (`ductwork.snapshots.guard`).
CREATE OR REPLACE MACRO {macro}(v) AS TABLE
SELECT * FROM main.{table} WHERE v IS NULL
UNION ALL BY NAME
SELECT COLUMNS(lambda c: c NOT IN ('valid_from', 'valid_to'))
FROM history.{table}
WHERE v IS NOT NULL AND valid_from <= v AND v < valid_to
UNION ALL BY NAME
SELECT t.* FROM main.{table} AS t
WHERE v IS NOT NULL AND EXISTS (SELECT 1 FROM history.{since} AS s WHERE {match} AND s.since <= v);

-- name: feed_keys
-- The keys whose record may have changed: here the records query is a stream's `changed_keys`
-- section, as it is (it may end the statement itself).
CREATE OR REPLACE TEMP TABLE feed_keys AS {records}

-- name: feed_key_list
SELECT coalesce(list(key), []) FROM feed_keys;

-- name: feed_now_table
-- The temp table `feed_now`: a stream's records now (`key`, `record`), hashed, which
-- `history.sql`'s `feed_now` compares with the recorded state. The query's own text may end
-- in a comment.
CREATE OR REPLACE TEMP TABLE feed_now AS
SELECT key, hash(record::VARCHAR) AS record_hash FROM ({records}
) AS now(key, record);

-- name: records_now
-- A stream's current records, from its `<stream>_as_of` macro (a query, inside `feed_now`)...
SELECT key, record FROM {macro}(NULL)

-- name: records_now_of_keys
-- ...or those of the keys `$keys` only.
SELECT key, record FROM {macro}(NULL) WHERE key IN (SELECT unnest($keys::VARCHAR[]))

-- name: logged
-- How many changes of a stream a publish logged.
SELECT count(*) FROM history.feed_log WHERE seq = ? AND stream = ?;

-- name: prune_versions
-- A table's versions that ended by the oldest publish kept (by the stream's horizon).
DELETE FROM history.{table} WHERE valid_to <= ?;
