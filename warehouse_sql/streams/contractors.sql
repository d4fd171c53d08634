-- The contractors stream: /internal/v1.0/accounts/contractors, kept verbatim and parsed.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
-- The contractors answer as received: `data` is a JSON text, kept verbatim.
CREATE TABLE IF NOT EXISTS contractors_raw (
    body        JSON NOT NULL,
    parse_error VARCHAR,                 -- why `data` could not be parsed, if it could not
    synced_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS contractors (
    contractor_id  VARCHAR PRIMARY KEY,
    name           VARCHAR,
    city           VARCHAR,
    state          VARCHAR,
    rating         DOUBLE,
    record         JSON NOT NULL,
    synced_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS contractor_reviews (
    review_id      VARCHAR NOT NULL,
    contractor_id  VARCHAR NOT NULL,
    rating         DOUBLE,
    text           VARCHAR,
    created_at     TIMESTAMPTZ,
    record         JSON NOT NULL,
    synced_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (contractor_id, review_id)
);

-- name: comments
COMMENT ON TABLE contractors_raw IS 'The contractors answer as received (its data member is JSON text, kept verbatim).';
COMMENT ON COLUMN contractors_raw.body IS 'The whole response body (JSON).';
COMMENT ON COLUMN contractors_raw.parse_error IS 'Why data could not be parsed, if it could not.';
COMMENT ON COLUMN contractors_raw.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE contractors IS 'Contractors parsed from the contractors answer.';
COMMENT ON COLUMN contractors.contractor_id IS 'Contractor id.';
COMMENT ON COLUMN contractors.name IS 'Name.';
COMMENT ON COLUMN contractors.city IS 'City.';
COMMENT ON COLUMN contractors.state IS 'State.';
COMMENT ON COLUMN contractors.rating IS 'Average rating.';
COMMENT ON COLUMN contractors.record IS 'The contractor exactly as received (JSON).';
COMMENT ON COLUMN contractors.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE contractor_reviews IS 'Reviews of contractors, one row per (contractor, review).';
COMMENT ON COLUMN contractor_reviews.review_id IS 'Review id.';
COMMENT ON COLUMN contractor_reviews.contractor_id IS 'Contractor reviewed.';
COMMENT ON COLUMN contractor_reviews.rating IS 'Rating given.';
COMMENT ON COLUMN contractor_reviews.text IS 'Review text.';
COMMENT ON COLUMN contractor_reviews.created_at IS 'When the review was written.';
COMMENT ON COLUMN contractor_reviews.record IS 'The review exactly as received (JSON).';
COMMENT ON COLUMN contractor_reviews.synced_at IS 'When the sync stored the row.';

-- name: served
-- The answer the read API gives: the upstream's own, as last stored (no row before a sync).
SELECT body FROM contractors_raw ORDER BY synced_at DESC LIMIT 1;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now): each
-- element of the answer's JSON text.
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `contractors_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO contractors_as_of(v) AS TABLE
SELECT contractor_id AS key, record FROM contractors_at(v);

-- name: erase
-- `ductwork forget`: the contractors of `erased_keys` (by `key`) and their reviews leave the
-- parsed tables; the verbatim answers (`contractors_raw`) are rewritten without them by
-- `ductwork.erasure.warehouse`, and the history schema's versions and the feed beside it.
DELETE FROM contractor_reviews WHERE contractor_id IN (SELECT key FROM erased_keys);

DELETE FROM contractors WHERE contractor_id IN (SELECT key FROM erased_keys);

-- name: erase_counts
-- The rows of the contractors of `erased_keys` in the parsed tables, by table.
SELECT 'contractor_reviews', count(*) FROM contractor_reviews
WHERE contractor_id IN (SELECT key FROM erased_keys)
UNION ALL
SELECT 'contractors', count(*) FROM contractors
WHERE contractor_id IN (SELECT key FROM erased_keys);
