-- Statements that work on any table a stream step writes, as templates: `{table}` is the
-- table's quoted name and `{column}` the column that selects a step's slice of it (both from
-- the registry); values travel as parameters.

-- name: count
SELECT count(*) FROM {table};

-- name: count_slice
SELECT count(*) FROM {table} WHERE {column} = ?;

-- name: delete
DELETE FROM {table};

-- name: delete_slice
DELETE FROM {table} WHERE {column} = ?;

-- name: insert
-- The rows of the Arrow table registered as `{rows}`, matched to the table's columns by name.
INSERT INTO {table} BY NAME SELECT * FROM {rows};
