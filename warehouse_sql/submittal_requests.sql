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
