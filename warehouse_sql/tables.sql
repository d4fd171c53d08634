-- Statements that work on any table a stream step writes, as templates: `{table}` is the
-- table's quoted name and `{column}` the column that selects a step's slice of it (both from
-- the registry); values travel as parameters.

-- name: count
SELECT count(*) FROM {table};

-- name: count_slice
SELECT count(*) FROM {table} WHERE {column} = ?;

-- name: key_faults
-- A table's rows with a NULL in its key (`{any_null}`: `a IS NULL OR b IS NULL`), and its rows
-- beyond the first of each key (`{key}`: `a, b`), for a key no primary key enforces.
SELECT
    count(*) FILTER (WHERE {any_null}),
    count(*) FILTER (WHERE NOT ({any_null}))
        - (SELECT count(*) FROM (SELECT DISTINCT {key} FROM {table} WHERE NOT ({any_null})))
FROM {table};

-- name: delete
DELETE FROM {table};

-- name: delete_slice
DELETE FROM {table} WHERE {column} = ?;

-- name: insert
-- The rows of the Arrow table registered as `{rows}`, matched to the table's columns by name.
INSERT INTO {table} BY NAME SELECT * FROM {rows};

-- name: every_row
-- Every row of a table or view, as it is (exports).
SELECT * FROM {table};

-- name: last_rowid
-- The last rowid and the row count of a table of the database `{database}` (a publish checks
-- that its checkpoint moved no row a numbered list points at).
SELECT max(rowid), count(*) FROM {database}.{table};
