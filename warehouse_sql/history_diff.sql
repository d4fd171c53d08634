-- Comparing a stream between two publishes (`ductwork diff`). `{records}` is the stream's
-- `<stream>_as_of` macro; `$from` and `$to` are publishes (seq).

-- name: counts
-- Records added, changed (their JSON differs) and deleted between the two publishes.
WITH a AS (SELECT key, record::VARCHAR AS record FROM {records}($from)),
     b AS (SELECT key, record::VARCHAR AS record FROM {records}($to))
SELECT
    count(*) FILTER (WHERE a.key IS NULL) AS added,
    count(*) FILTER (WHERE a.key IS NOT NULL AND b.key IS NOT NULL AND a.record <> b.record)
        AS changed,
    count(*) FILTER (WHERE b.key IS NULL) AS deleted
FROM a FULL JOIN b ON a.key = b.key;

-- name: changed_members
-- For the records changed between the two publishes: each member that changed (appeared,
-- went, or took another value) and in how many records.
WITH a AS (SELECT key, record FROM {records}($from)),
     b AS (SELECT key, record FROM {records}($to)),
     changed AS (
         SELECT a.key, a.record AS before, b.record AS after
         FROM a JOIN b ON a.key = b.key
         WHERE a.record::VARCHAR <> b.record::VARCHAR
     ),
     members AS (
         SELECT key, before, after,
                unnest(list_distinct(list_concat(json_keys(before), json_keys(after)))) AS member
         FROM changed
     )
SELECT member, count(*) AS records
FROM members
WHERE (before -> member)::VARCHAR IS DISTINCT FROM (after -> member)::VARCHAR
GROUP BY member
ORDER BY records DESC, member;

-- name: member_types
-- Every member the stream's records have at publish `$at`, with its JSON type and how many
-- records have it so.
SELECT member, json_type(record -> member) AS type, count(*) AS records
FROM (SELECT record, unnest(json_keys(record)) AS member FROM {records}($at))
GROUP BY member, type
ORDER BY member, type;
