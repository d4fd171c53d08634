-- Reading a positioned list of a snapshot: a numbered table `{list}` (built by its stream's
-- `serving` section: pos, key_us, for some an id, and row_id) whose positions point into the
-- base table `{base}` by rowid. Positions travel as parameters.

-- name: keys
-- The sort keys, in position order.
SELECT key_us FROM {list} ORDER BY pos;

-- name: keys_and_ids
-- The sort keys and the ids that break their ties, in position order.
SELECT key_us, id FROM {list} ORDER BY pos;

-- name: records
-- The records of positions [?, ?).
SELECT b.record FROM {list} AS n JOIN {base} AS b ON b.rowid = n.row_id
WHERE n.pos >= ? AND n.pos < ? ORDER BY n.pos;

-- name: records_with_commas
-- The records of positions [?, ?), each followed by the comma that joins it to the next: the
-- content of a record file.
SELECT b.record || ',' FROM {list} AS n JOIN {base} AS b ON b.rowid = n.row_id
WHERE n.pos >= ? AND n.pos < ? ORDER BY n.pos;


-- name: keys_and_positions
-- Each position with its record's key `{key}` (a column of `{base}`), in no order: the changes
-- feed's index of a paged list's record file (serve/key_positions.py sorts it).
SELECT b.{key}, n.pos FROM {list} AS n JOIN {base} AS b ON b.rowid = n.row_id;
