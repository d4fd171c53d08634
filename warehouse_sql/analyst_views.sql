-- Views for analysts, created in every published snapshot (analysts query snapshots). Each
-- view and each of its columns carries a comment (COMMENT ON), which `ductwork docs` prints
-- into the data dictionary.

-- Pairings with both product slots expanded: each unit's series, family, cooling and heating
-- capacity and efficiency (SEER2, HSPF2) from the catalog. P1 is a Pairing's indoor unit and
-- P2 its outdoor unit; a Standalone has P1 only. A slot whose SKU the catalog lacks has NULLs.
CREATE OR REPLACE VIEW pairings_expanded AS
WITH slot AS (
    SELECT
        pp.relationship_id,
        pp.position,
        pp.sku,
        pp.unit_type,
        u.series_name,
        u.family_name,
        u.status,
        TRY_CAST(u.record ->> '$.performance.coolingCapacityBtuh' AS DOUBLE) AS cooling_btuh,
        TRY_CAST(u.record ->> '$.performance.heatingCapacityBtuh' AS DOUBLE) AS heating_btuh,
        TRY_CAST(u.record ->> '$.performance.seer2' AS DOUBLE) AS seer2,
        TRY_CAST(u.record ->> '$.performance.hspf2' AS DOUBLE) AS hspf2
    FROM pairing_products AS pp
    LEFT JOIN units AS u ON u.sku = pp.sku AND u.unit_type = pp.unit_type
)
SELECT
    p.relationship_id,
    p.rel_type,
    p.updated_at,
    p1.sku AS p1_sku,
    p1.unit_type AS p1_unit_type,
    p1.series_name AS p1_series,
    p1.family_name AS p1_family,
    p1.status AS p1_status,
    p1.cooling_btuh AS p1_cooling_capacity_btuh,
    p1.heating_btuh AS p1_heating_capacity_btuh,
    p1.seer2 AS p1_seer2,
    p1.hspf2 AS p1_hspf2,
    p2.sku AS p2_sku,
    p2.unit_type AS p2_unit_type,
    p2.series_name AS p2_series,
    p2.family_name AS p2_family,
    p2.status AS p2_status,
    p2.cooling_btuh AS p2_cooling_capacity_btuh,
    p2.heating_btuh AS p2_heating_capacity_btuh,
    p2.seer2 AS p2_seer2,
    p2.hspf2 AS p2_hspf2
FROM pairings AS p
LEFT JOIN slot AS p1 ON p1.relationship_id = p.relationship_id AND p1.position = 'P1'
LEFT JOIN slot AS p2 ON p2.relationship_id = p.relationship_id AND p2.position = 'P2';

COMMENT ON VIEW pairings_expanded IS 'Pairings with both units expanded: series, family, capacity and efficiency of P1 (indoor unit of a Pairing) and P2 (its outdoor unit).';
COMMENT ON COLUMN pairings_expanded.relationship_id IS 'The pairing''s relationshipId.';
COMMENT ON COLUMN pairings_expanded.rel_type IS 'Pairing, Standalone or Combinations.';
COMMENT ON COLUMN pairings_expanded.updated_at IS 'The pairing''s updatedAt.';
COMMENT ON COLUMN pairings_expanded.p1_sku IS 'SKU in slot P1 (a Pairing''s indoor unit).';
COMMENT ON COLUMN pairings_expanded.p1_unit_type IS 'Unit list of the P1 product, e.g. indoor-units.';
COMMENT ON COLUMN pairings_expanded.p1_series IS 'Series name of the P1 unit (NULL when the catalog lacks it).';
COMMENT ON COLUMN pairings_expanded.p1_family IS 'Family name of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_status IS 'Active or Discontinued, for the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_cooling_capacity_btuh IS 'Cooling capacity of the P1 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p1_heating_capacity_btuh IS 'Heating capacity of the P1 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p1_seer2 IS 'Cooling efficiency (SEER2) of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p1_hspf2 IS 'Heating efficiency (HSPF2) of the P1 unit.';
COMMENT ON COLUMN pairings_expanded.p2_sku IS 'SKU in slot P2 (a Pairing''s outdoor unit).';
COMMENT ON COLUMN pairings_expanded.p2_unit_type IS 'Unit list of the P2 product, e.g. outdoor-units.';
COMMENT ON COLUMN pairings_expanded.p2_series IS 'Series name of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_family IS 'Family name of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_status IS 'Active or Discontinued, for the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_cooling_capacity_btuh IS 'Cooling capacity of the P2 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p2_heating_capacity_btuh IS 'Heating capacity of the P2 unit, BTU/h.';
COMMENT ON COLUMN pairings_expanded.p2_seer2 IS 'Cooling efficiency (SEER2) of the P2 unit.';
COMMENT ON COLUMN pairings_expanded.p2_hspf2 IS 'Heating efficiency (HSPF2) of the P2 unit.';

-- Digital assets counted per SKU and asset type, live and deleted apart.
CREATE OR REPLACE VIEW digital_assets_by_sku_type AS
SELECT
    sku,
    asset_type,
    count(*) FILTER (WHERE deleted_at IS NULL) AS live_assets,
    count(*) FILTER (WHERE deleted_at IS NOT NULL) AS deleted_assets,
    sum(file_size_bytes) FILTER (WHERE deleted_at IS NULL) AS live_bytes,
    max(updated_at) AS last_updated_at
FROM digital_assets
GROUP BY sku, asset_type;

COMMENT ON VIEW digital_assets_by_sku_type IS 'Digital assets per SKU and asset type: live and deleted counts, bytes, last update.';
COMMENT ON COLUMN digital_assets_by_sku_type.sku IS 'Product SKU the assets belong to.';
COMMENT ON COLUMN digital_assets_by_sku_type.asset_type IS 'Manual, Brochure, Spec Sheet, Submittal, Image or Video.';
COMMENT ON COLUMN digital_assets_by_sku_type.live_assets IS 'Assets still listed upstream.';
COMMENT ON COLUMN digital_assets_by_sku_type.deleted_assets IS 'Assets a reconciliation found deleted upstream.';
COMMENT ON COLUMN digital_assets_by_sku_type.live_bytes IS 'Total fileSizeBytes of the live assets.';
COMMENT ON COLUMN digital_assets_by_sku_type.last_updated_at IS 'Newest updatedAt among the assets.';

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

-- Leads counted by the week of CreatedDate, state, business unit, source and current status.
CREATE OR REPLACE VIEW leads_by_week AS
SELECT
    date_trunc('week', created_at)::DATE AS week,
    state_code,
    business_unit,
    lead_source,
    status,
    count(*) AS leads
FROM leads
GROUP BY ALL;

COMMENT ON VIEW leads_by_week IS 'Leads per week of creation, state, business unit, source and current status.';
COMMENT ON COLUMN leads_by_week.week IS 'Monday of the week of CreatedDate (UTC).';
COMMENT ON COLUMN leads_by_week.state_code IS 'StateCode of the leads.';
COMMENT ON COLUMN leads_by_week.business_unit IS 'Business_Unit__c of the leads.';
COMMENT ON COLUMN leads_by_week.lead_source IS 'LeadSource of the leads.';
COMMENT ON COLUMN leads_by_week.status IS 'Current Status of the leads.';
COMMENT ON COLUMN leads_by_week.leads IS 'Number of leads.';

-- Every change of a lead's status, from the lead history.
CREATE OR REPLACE VIEW lead_status_transitions AS
WITH ordered AS (
    SELECT
        id,
        valid_from,
        status,
        lag(status) OVER (PARTITION BY id ORDER BY valid_from) AS previous_status,
        row_number() OVER (PARTITION BY id ORDER BY valid_from) AS version
    FROM lead_history
)
SELECT id, previous_status AS from_status, status AS to_status, valid_from AS changed_at
FROM ordered
WHERE version > 1 AND previous_status IS DISTINCT FROM status;

COMMENT ON VIEW lead_status_transitions IS 'Each status change of each lead: from, to and when the sync saw it.';
COMMENT ON COLUMN lead_status_transitions.id IS 'Lead Id.';
COMMENT ON COLUMN lead_status_transitions.from_status IS 'Status before the change.';
COMMENT ON COLUMN lead_status_transitions.to_status IS 'Status after the change.';
COMMENT ON COLUMN lead_status_transitions.changed_at IS 'Start of the version with the new status.';

-- Time each lead spent in each status: consecutive history versions with the same status form
-- one stint; a current stint runs until now.
CREATE OR REPLACE VIEW lead_time_in_status AS
WITH marked AS (
    SELECT
        id, status, valid_from, valid_to, is_current,
        CASE WHEN status IS NOT DISTINCT FROM
                  lag(status) OVER (PARTITION BY id ORDER BY valid_from) THEN 0 ELSE 1 END
            AS starts_stint
    FROM lead_history
),
numbered AS (
    SELECT *, sum(starts_stint) OVER (PARTITION BY id ORDER BY valid_from) AS stint
    FROM marked
)
SELECT
    id,
    stint,
    any_value(status) AS status,
    min(valid_from) AS entered_at,
    CASE WHEN bool_or(is_current) THEN NULL ELSE max(valid_to) END AS left_at,
    bool_or(is_current) AS is_current,
    (epoch(CASE WHEN bool_or(is_current) THEN now() ELSE max(valid_to) END)
        - epoch(min(valid_from))) / 86400.0 AS days_in_status
FROM numbered
GROUP BY id, stint;

COMMENT ON VIEW lead_time_in_status IS 'Stints of each lead in each status with their length in days (current stints run until now).';
COMMENT ON COLUMN lead_time_in_status.id IS 'Lead Id.';
COMMENT ON COLUMN lead_time_in_status.stint IS 'Ordinal of the stint within the lead''s history, from 1.';
COMMENT ON COLUMN lead_time_in_status.status IS 'Status during the stint.';
COMMENT ON COLUMN lead_time_in_status.entered_at IS 'When the stint began (the first version''s valid_from).';
COMMENT ON COLUMN lead_time_in_status.left_at IS 'When the stint ended; NULL while the lead is still in the status.';
COMMENT ON COLUMN lead_time_in_status.is_current IS 'True for the stint the lead is in now.';
COMMENT ON COLUMN lead_time_in_status.days_in_status IS 'Length of the stint in days.';

-- Catalog units marked Discontinued that pairings still name.
CREATE OR REPLACE VIEW discontinued_products_in_pairings AS
SELECT
    u.sku,
    u.unit_type,
    u.series_name,
    u.family_name,
    count(DISTINCT pp.relationship_id) AS pairings,
    list(DISTINCT pp.relationship_id ORDER BY pp.relationship_id) AS relationship_ids
FROM units AS u
JOIN pairing_products AS pp ON pp.sku = u.sku AND pp.unit_type = u.unit_type
WHERE u.status = 'Discontinued'
GROUP BY u.sku, u.unit_type, u.series_name, u.family_name;

COMMENT ON VIEW discontinued_products_in_pairings IS 'Discontinued catalog units still referenced by pairings.';
COMMENT ON COLUMN discontinued_products_in_pairings.sku IS 'SKU of the discontinued unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.unit_type IS 'Unit list it belongs to.';
COMMENT ON COLUMN discontinued_products_in_pairings.series_name IS 'Series name of the unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.family_name IS 'Family name of the unit.';
COMMENT ON COLUMN discontinued_products_in_pairings.pairings IS 'How many pairings name it.';
COMMENT ON COLUMN discontinued_products_in_pairings.relationship_ids IS 'The relationshipIds of those pairings.';
