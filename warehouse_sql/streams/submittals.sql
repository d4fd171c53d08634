-- The submittals stream: /warehouse/v1.0/submittal-data, one request per pairing and standalone unit.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
-- One submittal per (idu, odu): a Pairing's P1/P2 SRNs, or a Standalone unit's SRN alone.
CREATE TABLE IF NOT EXISTS submittals (
    request_key      VARCHAR PRIMARY KEY,   -- 'idu|odu' with empty text for an absent side
    idu              VARCHAR,
    odu              VARCHAR,
    found            BOOLEAN NOT NULL,      -- false when the upstream answered 404
    ahri_number      VARCHAR,
    document_url     VARCHAR,
    updated_at       TIMESTAMPTZ,
    source_signature VARCHAR,               -- what the request was derived from; refetch on change
    record           JSON,                  -- the whole response body as received
    synced_at        TIMESTAMPTZ NOT NULL
);

-- name: comments
COMMENT ON TABLE submittals IS 'Submittal data, one row per (idu, odu) request a pairing or standalone unit implies.';
COMMENT ON COLUMN submittals.request_key IS '''idu|odu'', with empty text for an absent side.';
COMMENT ON COLUMN submittals.idu IS 'Indoor unit SRN of the request.';
COMMENT ON COLUMN submittals.odu IS 'Outdoor unit SRN of the request.';
COMMENT ON COLUMN submittals.found IS 'False when the upstream answered 404.';
COMMENT ON COLUMN submittals.ahri_number IS 'AHRI certificate number.';
COMMENT ON COLUMN submittals.document_url IS 'Submittal document URL.';
COMMENT ON COLUMN submittals.updated_at IS 'The submittal''s updatedAt.';
COMMENT ON COLUMN submittals.source_signature IS 'What the request was derived from; a change triggers a refetch.';
COMMENT ON COLUMN submittals.record IS 'The response''s data exactly as received (JSON); NULL when not found.';
COMMENT ON COLUMN submittals.synced_at IS 'When the sync stored the row.';

-- name: views
-- Submittal coverage, one row per pairing: the submittal request the pairing implies (as in
-- submittal_requests.sql) and whether the upstream had submittal data for it.
CREATE OR REPLACE VIEW submittal_coverage AS
WITH slot AS (
    SELECT
        pp.relationship_id,
        pp.position,
        pp.srn,
        coalesce(u.category,
                 CASE pp.unit_type WHEN 'indoor-units' THEN 'INDOOR'
                                   WHEN 'outdoor-units' THEN 'OUTDOOR' END) AS side
    FROM pairing_products AS pp
    LEFT JOIN units AS u ON u.sku = pp.sku AND u.unit_type = pp.unit_type
),
keyed AS (
    SELECT
        p.relationship_id,
        p.rel_type,
        CASE
            WHEN p.rel_type = 'Pairing' AND (p1.srn IS NOT NULL OR p2.srn IS NOT NULL)
                THEN coalesce(p1.srn, '') || '|' || coalesce(p2.srn, '')
            WHEN p.rel_type = 'Standalone' AND p1.srn IS NOT NULL AND p1.side = 'INDOOR'
                THEN p1.srn || '|'
            WHEN p.rel_type = 'Standalone' AND p1.srn IS NOT NULL AND p1.side = 'OUTDOOR'
                THEN '|' || p1.srn
        END AS request_key
    FROM pairings AS p
    LEFT JOIN slot AS p1 ON p1.relationship_id = p.relationship_id AND p1.position = 'P1'
    LEFT JOIN slot AS p2 ON p2.relationship_id = p.relationship_id AND p2.position = 'P2'
)
SELECT
    k.relationship_id,
    k.rel_type,
    k.request_key,
    coalesce(s.found, false) AS has_submittal_data,
    CASE
        WHEN k.request_key IS NULL THEN 'no request'
        WHEN s.request_key IS NULL THEN 'not fetched'
        WHEN s.found THEN 'found'
        ELSE 'not found'
    END AS coverage,
    s.ahri_number,
    s.document_url
FROM keyed AS k
LEFT JOIN submittals AS s ON s.request_key = k.request_key;

COMMENT ON VIEW submittal_coverage IS 'Pairings with and without submittal data: the (idu, odu) request each implies and what the upstream answered.';
COMMENT ON COLUMN submittal_coverage.relationship_id IS 'The pairing''s relationshipId.';
COMMENT ON COLUMN submittal_coverage.rel_type IS 'Pairing, Standalone or Combinations.';
COMMENT ON COLUMN submittal_coverage.request_key IS '''idu|odu'' of the submittal request (NULL: the pairing implies none).';
COMMENT ON COLUMN submittal_coverage.has_submittal_data IS 'True when the upstream answered the request with submittal data.';
COMMENT ON COLUMN submittal_coverage.coverage IS 'found, not found (404 upstream), not fetched (yet) or no request.';
COMMENT ON COLUMN submittal_coverage.ahri_number IS 'AHRI certificate number of the submittal.';
COMMENT ON COLUMN submittal_coverage.document_url IS 'Submittal document URL.';

-- name: upsert
-- Upsert fetched submittals (registered as `incoming_rows`).
INSERT OR REPLACE INTO submittals BY NAME SELECT * FROM incoming_rows;

-- name: requests
-- The submittal requests the catalog implies, one row per (idu, odu):
--   a `Pairing`: its P1 SRN as idu and its P2 SRN as odu;
--   a `Standalone` indoor unit: idu alone; a `Standalone` outdoor unit: odu alone.
-- `signature` changes when the pairing or either unit changes: the request is then re-fetched.
WITH slots AS (
    SELECT
        p.relationship_id,
        p.rel_type,
        p.updated_at AS pairing_updated_at,
        pp.position,
        pp.srn,
        coalesce(u.category,
                 CASE pp.unit_type WHEN 'indoor-units' THEN 'INDOOR'
                                   WHEN 'outdoor-units' THEN 'OUTDOOR' END) AS side,
        u.updated_at AS unit_updated_at
    FROM pairings AS p
    JOIN pairing_products AS pp USING (relationship_id)
    LEFT JOIN units AS u ON u.sku = pp.sku AND u.unit_type = pp.unit_type
),
requests AS (
    SELECT
        max(srn) FILTER (WHERE position = 'P1') AS idu,
        max(srn) FILTER (WHERE position = 'P2') AS odu,
        concat_ws('|', any_value(pairing_updated_at)::VARCHAR,
                  string_agg(coalesce(unit_updated_at::VARCHAR, '-'), '|' ORDER BY position))
            AS signature
    FROM slots
    WHERE rel_type = 'Pairing'
    GROUP BY relationship_id
    UNION ALL
    SELECT
        CASE WHEN side = 'INDOOR' THEN srn END AS idu,
        CASE WHEN side = 'OUTDOOR' THEN srn END AS odu,
        concat_ws('|', pairing_updated_at::VARCHAR, coalesce(unit_updated_at::VARCHAR, '-'))
            AS signature
    FROM slots
    WHERE rel_type = 'Standalone' AND side IN ('INDOOR', 'OUTDOOR')
)
SELECT
    coalesce(idu, '') || '|' || coalesce(odu, '') AS request_key,
    any_value(idu) AS idu,
    any_value(odu) AS odu,
    max(signature) AS signature
FROM requests
WHERE idu IS NOT NULL OR odu IS NOT NULL
GROUP BY request_key
ORDER BY request_key;

-- name: keys
-- Each stored request with the signature it was fetched under.
SELECT request_key, source_signature FROM submittals;

-- name: delete_others
-- Rows of requests no longer derived (parameter: the derived request keys); returns how many.
DELETE FROM submittals WHERE request_key NOT IN (SELECT unnest(?::VARCHAR[]));

-- name: counts
-- Rows, and of them the ones the upstream had data for.
SELECT count(*), count(*) FILTER (found) FROM submittals;

-- name: served
-- The submittals found, by the (idu, odu) a request names.
SELECT idu, odu, record FROM submittals WHERE found;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now): each
-- submittal found, keyed "<idu>|<odu>" (an absent side empty); a 404 is no record.
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `submittals_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO submittals_as_of(v) AS TABLE
SELECT request_key AS key, record FROM submittals_at(v) WHERE found;
