-- Whether a snapshot file (published, or rebuilt for the past) still holds any of the keys an
-- erasure forgets: run read-only on the file itself. Templates: `{schema}`, `{table}` and
-- `{column}` are quoted identifiers read from the file's own catalog; the keys travel as a
-- list parameter.

-- name: key_columns
-- The text columns, in every schema, named as a key column of the erased stream's tables
-- (its current tables, their versions under `history`, and every table beside them keyed
-- the same way, such as a stream's own type-2 history).
SELECT schema_name, table_name, column_name
FROM duckdb_columns()
WHERE database_name = current_database()
  AND data_type = 'VARCHAR'
  AND list_contains(?, column_name)
ORDER BY ALL;

-- name: keyless_columns
-- The text columns of a table of the stream without a key (a raw document), in every schema.
SELECT schema_name, column_name
FROM duckdb_columns()
WHERE database_name = current_database()
  AND table_name = ?
  AND data_type IN ('VARCHAR', 'JSON')
ORDER BY ALL;

-- name: holds_key
SELECT EXISTS (SELECT 1 FROM {schema}.{table} WHERE list_contains(?, {column}));

-- name: holds_text
SELECT EXISTS (
    SELECT 1 FROM {schema}.{table} AS held, unnest(?) AS wanted(needle)
    WHERE contains(CAST(held.{column} AS VARCHAR), wanted.needle)
);

-- name: has_feed
SELECT count(*) = 2
FROM duckdb_tables()
WHERE database_name = current_database()
  AND schema_name = 'history'
  AND table_name IN ('feed_log', 'feed_state');

-- name: feed_holds_key
-- The changes feed's log and state name a record by its stream and key. A logged deletion
-- is left out: the erasure itself logs one, so that a walk from an earlier token tells the
-- consumer to erase the key too, and it names the key alone.
SELECT EXISTS (
        SELECT 1 FROM history.feed_log WHERE stream = ? AND list_contains(?, key) AND NOT deleted
    )
    OR EXISTS (SELECT 1 FROM history.feed_state WHERE stream = ? AND list_contains(?, key));
