-- The leads stream: the lead list (cursor-paged by CreatedDate, Id) and each lead's details.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
-- The lead tables grow with the upstream and have no primary key: DuckDB holds a key's index
-- whole in memory while a batch writes, which made a sync's memory grow with the leads. Each
-- batch is one row per id (its upsert deletes, then inserts), and the blocking check
-- `<asset>_keys_unique_and_present` counts NULL and repeated ids before any publish.
CREATE TABLE IF NOT EXISTS leads (
    id                 VARCHAR NOT NULL,
    created_at         TIMESTAMPTZ,
    created_date_text  VARCHAR,          -- CreatedDate exactly as received (the cursor: its UTC form)
    lead_number        VARCHAR,          -- LeadID__c
    status             VARCHAR,
    lead_source        VARCHAR,
    name               VARCHAR,
    business_unit      VARCHAR,
    state_code         VARCHAR,
    postal_code        VARCHAR,
    campaign           VARCHAR,
    record             JSON NOT NULL,    -- the list item as received
    synced_at          TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS lead_details (
    id                   VARCHAR NOT NULL,
    email                VARCHAR,
    name                 VARCHAR,
    company              VARCHAR,
    phone                VARCHAR,
    category             VARCHAR,
    status               VARCHAR,
    purchase_status      VARCHAR,
    assigned_contractor  VARCHAR,
    assigned_bu          VARCHAR,
    annual_revenue       DOUBLE,
    do_not_sell          BOOLEAN,
    found                BOOLEAN NOT NULL,   -- false when the upstream answered 404
    record               JSON,               -- the detail object as received
    synced_at            TIMESTAMPTZ NOT NULL
);

-- Leads whose details must be (re)fetched: new leads and leads whose list item changed.
-- Filled in the transaction that upserts the list page; drained by the lead-details asset.
-- Unindexed, as `digital_asset_walk_ids` is: draining it deletes every row, in batches.
CREATE TABLE IF NOT EXISTS lead_detail_queue (
    id  VARCHAR NOT NULL
);

-- Type-2 history of leads with their details: one row per version. A version opens when the
-- list item or the details change, and closes (valid_to, is_current = false) when the next
-- one opens or the lead is deleted upstream (a deleted lead has no current version). Written
-- in the transactions that upsert `leads` and `lead_details`, and that forget deleted leads.
CREATE TABLE IF NOT EXISTS lead_history (
    id                   VARCHAR NOT NULL,
    valid_from           TIMESTAMPTZ NOT NULL,
    valid_to             TIMESTAMPTZ,        -- NULL while current
    is_current           BOOLEAN NOT NULL,
    created_at           TIMESTAMPTZ,
    lead_number          VARCHAR,
    status               VARCHAR,
    lead_source          VARCHAR,
    business_unit        VARCHAR,
    state_code           VARCHAR,
    postal_code          VARCHAR,
    campaign             VARCHAR,
    detail_found         BOOLEAN,            -- NULL until the details were fetched
    detail_status        VARCHAR,
    purchase_status      VARCHAR,
    category             VARCHAR,
    company              VARCHAR,
    assigned_contractor  VARCHAR,
    assigned_bu          VARCHAR,
    annual_revenue       DOUBLE,
    list_hash            VARCHAR NOT NULL,   -- md5 of the list item as received
    detail_hash          VARCHAR             -- md5 of the details as received (NULL: none yet)
);

-- name: comments
COMMENT ON TABLE leads IS 'CRM lead list items, one row per lead Id (current state).';
COMMENT ON COLUMN leads.id IS 'Lead Id.';
COMMENT ON COLUMN leads.created_at IS 'CreatedDate.';
COMMENT ON COLUMN leads.created_date_text IS 'CreatedDate exactly as received (the cursor holds it in UTC, milliseconds, Z).';
COMMENT ON COLUMN leads.lead_number IS 'LeadID__c.';
COMMENT ON COLUMN leads.status IS 'Status.';
COMMENT ON COLUMN leads.lead_source IS 'LeadSource.';
COMMENT ON COLUMN leads.name IS 'Name.';
COMMENT ON COLUMN leads.business_unit IS 'Business_Unit__c.';
COMMENT ON COLUMN leads.state_code IS 'StateCode.';
COMMENT ON COLUMN leads.postal_code IS 'PostalCode.';
COMMENT ON COLUMN leads.campaign IS 'Campaign__c.';
COMMENT ON COLUMN leads.record IS 'The list item exactly as received (JSON).';
COMMENT ON COLUMN leads.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE lead_details IS 'Lead details (/crm/v1.1/leads/{id}), one row per lead; found = false for a 404.';
COMMENT ON COLUMN lead_details.id IS 'Lead Id.';
COMMENT ON COLUMN lead_details.email IS 'email.';
COMMENT ON COLUMN lead_details.name IS 'name.';
COMMENT ON COLUMN lead_details.company IS 'company.';
COMMENT ON COLUMN lead_details.phone IS 'phone.';
COMMENT ON COLUMN lead_details.category IS 'category.';
COMMENT ON COLUMN lead_details.status IS 'status (as the details state it).';
COMMENT ON COLUMN lead_details.purchase_status IS 'purchaseStatus.';
COMMENT ON COLUMN lead_details.assigned_contractor IS 'assignedContractor.';
COMMENT ON COLUMN lead_details.assigned_bu IS 'assignedBU.';
COMMENT ON COLUMN lead_details.annual_revenue IS 'annualRevenue.';
COMMENT ON COLUMN lead_details.do_not_sell IS 'doNotSell.';
COMMENT ON COLUMN lead_details.found IS 'False when the upstream answered 404.';
COMMENT ON COLUMN lead_details.record IS 'The detail object exactly as received (JSON); NULL when not found.';
COMMENT ON COLUMN lead_details.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE lead_detail_queue IS 'Leads whose details must be (re)fetched: new or changed leads, drained by the lead-details asset.';
COMMENT ON COLUMN lead_detail_queue.id IS 'Lead Id.';

COMMENT ON TABLE lead_history IS 'Type-2 history of leads with their details: one row per version. Status on a date D: valid_from <= D AND (valid_to > D OR valid_to IS NULL).';
COMMENT ON COLUMN lead_history.id IS 'Lead Id.';
COMMENT ON COLUMN lead_history.valid_from IS 'Start of the version: CreatedDate for the first, the sync time for later ones.';
COMMENT ON COLUMN lead_history.valid_to IS 'End of the version; NULL while current.';
COMMENT ON COLUMN lead_history.is_current IS 'True for the lead''s current version.';
COMMENT ON COLUMN lead_history.created_at IS 'CreatedDate.';
COMMENT ON COLUMN lead_history.lead_number IS 'LeadID__c during the version.';
COMMENT ON COLUMN lead_history.status IS 'Status (list item) during the version.';
COMMENT ON COLUMN lead_history.lead_source IS 'LeadSource during the version.';
COMMENT ON COLUMN lead_history.business_unit IS 'Business_Unit__c during the version.';
COMMENT ON COLUMN lead_history.state_code IS 'StateCode during the version.';
COMMENT ON COLUMN lead_history.postal_code IS 'PostalCode during the version.';
COMMENT ON COLUMN lead_history.campaign IS 'Campaign__c during the version.';
COMMENT ON COLUMN lead_history.detail_found IS 'Whether the details existed upstream; NULL until fetched.';
COMMENT ON COLUMN lead_history.detail_status IS 'status of the details during the version.';
COMMENT ON COLUMN lead_history.purchase_status IS 'purchaseStatus during the version.';
COMMENT ON COLUMN lead_history.category IS 'category during the version.';
COMMENT ON COLUMN lead_history.company IS 'company during the version.';
COMMENT ON COLUMN lead_history.assigned_contractor IS 'assignedContractor during the version.';
COMMENT ON COLUMN lead_history.assigned_bu IS 'assignedBU during the version.';
COMMENT ON COLUMN lead_history.annual_revenue IS 'annualRevenue during the version.';
COMMENT ON COLUMN lead_history.list_hash IS 'md5 of the list item as received.';
COMMENT ON COLUMN lead_history.detail_hash IS 'md5 of the details as received; NULL before they were fetched.';

-- name: serving
-- Built inside every published snapshot (never in the working warehouse): the leads in the
-- contract's order, numbered, so the read API pages by position without sorting (see the
-- digital assets' `serving` section for why a position names its row by rowid).
CREATE TABLE serving_leads AS
SELECT
    (row_number() OVER (ORDER BY created_at, id) - 1)::BIGINT AS pos,
    epoch_us(created_at) AS key_us,
    id,
    rowid AS row_id
FROM leads
ORDER BY pos;

COMMENT ON TABLE serving_leads IS 'Leads numbered in the contract''s order, for the read API''s paging.';
COMMENT ON COLUMN serving_leads.pos IS 'Position in (CreatedDate, Id) order, from 0.';
COMMENT ON COLUMN serving_leads.key_us IS 'CreatedDate in microseconds since the epoch.';
COMMENT ON COLUMN serving_leads.id IS 'Lead Id.';
COMMENT ON COLUMN serving_leads.row_id IS 'rowid of the lead in leads (valid in this snapshot only).';

-- name: views
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

-- name: changed
-- Queue the details of leads in an incoming batch (registered as `incoming_rows`) that are
-- new, whose list item changed, or whose details were never fetched. Run before the upsert.
-- $lo and $hi are the batch's earliest and latest CreatedDate: stored leads outside them
-- cannot share an id with the batch unless their CreatedDate changed, and such a lead is
-- then taken for new, which queues it again, as a change would. The bound lets the scan skip
-- the record column of every other lead.
INSERT INTO lead_detail_queue
SELECT DISTINCT i.id
FROM incoming_rows AS i
LEFT JOIN (
    SELECT id, record FROM leads
    WHERE created_at BETWEEN $lo AND $hi OR created_at IS NULL
) AS l ON l.id = i.id
LEFT JOIN lead_details AS d ON d.id = i.id
WHERE (l.id IS NULL OR l.record::VARCHAR <> i.record OR d.id IS NULL)
  -- NOT EXISTS, not NOT IN: the same ids (the queue holds no NULL), without NOT IN's NULL
  -- bookkeeping over the whole queue.
  AND NOT EXISTS (SELECT 1 FROM lead_detail_queue AS q WHERE q.id = i.id)
  -- A suppressed lead (`ductwork forget --suppress`) is never queued again.
  AND NOT EXISTS (
      SELECT 1 FROM erasure.suppressions AS s WHERE s.stream = 'leads' AND s.key = i.id
  );

-- name: differing
-- The leads of an incoming batch (registered as `incoming_rows`) that are new or whose list
-- item differs from the stored one: only these are upserted and versioned, so re-reading the
-- recent window writes nothing when nothing changed. $lo and $hi bound the stored leads
-- compared, as in leads_changed.sql; a lead whose CreatedDate moved is upserted as a change.
SELECT i.*
FROM incoming_rows AS i
LEFT JOIN (
    SELECT id, record FROM leads
    WHERE created_at BETWEEN $lo AND $hi OR created_at IS NULL
) AS l ON l.id = i.id
WHERE (l.id IS NULL OR l.record::VARCHAR <> i.record)
  -- A suppressed lead (`ductwork forget --suppress`) never lands again.
  AND NOT EXISTS (
      SELECT 1 FROM erasure.suppressions AS s WHERE s.stream = 'leads' AND s.key = i.id
  );

-- name: upsert
-- Upsert a batch of lead list items (registered as `incoming_rows`, one row per id). Deleted and
-- inserted anew rather than replaced in place, for the reason given in the upsert section of
-- digital_assets.sql.
DELETE FROM leads WHERE id IN (SELECT id FROM incoming_rows);

INSERT INTO leads BY NAME SELECT * FROM incoming_rows;

-- name: history_apply
-- New versions in `lead_history` for the leads of a batch (registered as `incoming_rows`, by
-- `id`), run in the transaction that upserted the batch into `leads` or `lead_details`.
-- A lead first seen opens a version valid from its CreatedDate; details fetched for the first
-- time complete the current version in place (not a change); any later change of the list item
-- or the details closes the current version and opens the next one at the sync time.
--
-- The batch's leads lie between the earliest and latest CreatedDate stored for them (or have
-- none), so the join below reads `leads`, record column and all, only there rather than
-- reading every lead for every batch.
-- The bound is taken from what is stored, not from the batch: the details path brings ids only.
-- Each record is hashed as it is read, once, and only the hashes go through the joins: joined
-- whole, the records of a batch took the statement above 48 MB of memory at 500,000 leads
-- (at most 40 MB with hashes), close to the sync's DuckDB limit.
SET VARIABLE lead_batch = (
    SELECT {'earliest': min(created_at), 'latest': max(created_at)}
    FROM leads
    WHERE id IN (SELECT id FROM incoming_rows)
);

CREATE OR REPLACE TEMP TABLE lead_versions AS
SELECT
    l.id, l.created_at, l.lead_number, l.status, l.lead_source, l.business_unit, l.state_code,
    l.postal_code, l.campaign,
    d.found AS detail_found, d.status AS detail_status, d.purchase_status, d.category,
    d.company, d.assigned_contractor, d.assigned_bu, d.annual_revenue,
    l.list_hash AS list_hash,
    -- NULL where the lead has no details yet (no row of lead_details to join).
    d.detail_hash AS detail_hash,
    CASE
        WHEN h.id IS NULL THEN 'new'
        WHEN h.list_hash = l.list_hash AND h.detail_hash IS NULL AND d.id IS NOT NULL
            THEN 'fill'
        WHEN h.list_hash <> l.list_hash OR h.detail_hash IS DISTINCT FROM d.detail_hash
            THEN 'change'
    END AS change,
    -- A lead listed again after its deletion opens its version when its last one ended, not
    -- at its CreatedDate: its versions never overlap (greatest passes over a NULL).
    CASE WHEN h.id IS NULL THEN greatest(least(coalesce(l.created_at, now()), now()), e.ended)
         ELSE greatest(now(), h.valid_from) END AS change_at
FROM (SELECT DISTINCT id FROM incoming_rows) AS i
JOIN (
    SELECT * EXCLUDE (record), md5(record::VARCHAR) AS list_hash FROM leads
    WHERE (
        created_at BETWEEN getvariable('lead_batch').earliest
                       AND getvariable('lead_batch').latest
        OR created_at IS NULL
    )
      AND id IN (SELECT id FROM incoming_rows)
) AS l ON l.id = i.id
-- The batch's details found by row first: joined whole, `lead_details` was read record and all
-- for every batch (a hash join filters after its scan), so a sync's writes grew with the
-- square of its leads (at 500,000 leads, a batch read 376 MB of details to use 7.5).
LEFT JOIN (
    SELECT * EXCLUDE (record), md5(coalesce(record::VARCHAR, 'not found')) AS detail_hash
    FROM lead_details
    WHERE rowid IN (SELECT rowid FROM lead_details WHERE id IN (SELECT id FROM incoming_rows))
) AS d ON d.id = l.id
LEFT JOIN lead_history AS h ON h.id = l.id AND h.is_current
LEFT JOIN (
    SELECT id, max(valid_to) AS ended FROM lead_history
    WHERE NOT is_current AND id IN (SELECT id FROM incoming_rows)
    GROUP BY id
) AS e ON e.id = l.id;

UPDATE lead_history AS h SET
    detail_found = v.detail_found, detail_status = v.detail_status,
    purchase_status = v.purchase_status, category = v.category, company = v.company,
    assigned_contractor = v.assigned_contractor, assigned_bu = v.assigned_bu,
    annual_revenue = v.annual_revenue, detail_hash = v.detail_hash
FROM lead_versions AS v
WHERE h.id = v.id AND h.is_current AND v.change = 'fill';

UPDATE lead_history AS h SET valid_to = v.change_at, is_current = false
FROM lead_versions AS v
WHERE h.id = v.id AND h.is_current AND v.change = 'change';

INSERT INTO lead_history BY NAME
SELECT
    id, change_at AS valid_from, NULL AS valid_to, true AS is_current, created_at, lead_number,
    status, lead_source, business_unit, state_code, postal_code, campaign, detail_found,
    detail_status, purchase_status, category, company, assigned_contractor, assigned_bu,
    annual_revenue, list_hash, detail_hash
FROM lead_versions
WHERE change IN ('new', 'change');

DROP TABLE lead_versions;
RESET VARIABLE lead_batch;

-- name: details_upsert
-- Upsert a batch of lead details (registered as `incoming_rows`), deleted and inserted anew
-- rather than replaced in place, for the reason given in the upsert section of
-- digital_assets.sql: `INSERT OR REPLACE` of 1 % of the details took eight times as long, and
-- the next checkpoint wrote the whole `record` column back.
DELETE FROM lead_details WHERE id IN (SELECT id FROM incoming_rows);

-- A suppressed lead's details (fetched though it was suppressed meanwhile) never land.
INSERT INTO lead_details BY NAME
SELECT * FROM incoming_rows AS i
WHERE NOT EXISTS (
    SELECT 1 FROM erasure.suppressions AS s WHERE s.stream = 'leads' AND s.key = i.id
);

-- name: stored_with_details
-- The stored record of each lead in the list parameter of ids that also has its details: what a
-- re-read page of leads is compared with before it is stored (`CursorList.stored_as_read`).
SELECT l.id, l.record::VARCHAR
FROM leads AS l
WHERE l.id IN (SELECT unnest(?::VARCHAR[]))
  AND l.id IN (SELECT id FROM lead_details);

-- name: listed_create
-- The ids the walks of a run read (`CursorList.start_listing`), in a temporary table filled as
-- each batch of pages is stored, a chunk of ids at a time: one list parameter of every id held
-- them all at once, a few hundred bytes each, as DuckDB values. A temporary table leaves the
-- warehouse file as it is; `unlisted` reads it once the listing is complete.
CREATE OR REPLACE TEMP TABLE listed_ids (id VARCHAR);

-- name: listed_add
-- A chunk of listed ids (the list parameter).
INSERT INTO listed_ids SELECT unnest(?::VARCHAR[]);

-- name: listed_drop
DROP TABLE IF EXISTS listed_ids;

-- name: unlisted
-- The stored leads a complete listing (its ids: the table listed_ids) did not list, so
-- deleted upstream: of every lead when $created_after is NULL (a listing from the first lead),
-- else of the leads created after it (a listing of that range: `createdAfter` keeps the leads
-- created strictly later). A lead without a CreatedDate lies in no such range. The ids come
-- from lists, not an Arrow table: a run with nothing new builds none (see `stored_with_details`).
SELECT l.id
FROM leads AS l
WHERE ($created_after IS NULL OR l.created_at > CAST($created_after AS TIMESTAMPTZ))
  AND l.id NOT IN (SELECT id FROM listed_ids);

-- name: forget_gone
-- Leads deleted upstream (registered as `gone_ids`, by `id`; found by a complete listing, or by
-- a 404 on their details): their current history versions close, so a deleted lead has no
-- current version, then they leave the list, their details and the detail queue. Run in the
-- transaction of the step that learnt of it; the details step stores the 404 after it.
UPDATE lead_history SET valid_to = greatest(now(), valid_from), is_current = false
WHERE is_current AND id IN (SELECT id FROM gone_ids);

DELETE FROM lead_detail_queue WHERE id IN (SELECT id FROM gone_ids);

DELETE FROM lead_details WHERE id IN (SELECT id FROM gone_ids);

DELETE FROM leads WHERE id IN (SELECT id FROM gone_ids);

-- name: erase
-- `ductwork forget`: the leads of `erased_keys` (by `key`) leave every table of the stream in
-- `main`: the list, the details, the detail queue and the lead history (every version). The
-- history schema's versions and the feed are erased beside it (`ductwork.erasure.warehouse`).
DELETE FROM lead_history WHERE id IN (SELECT key FROM erased_keys);

DELETE FROM lead_detail_queue WHERE id IN (SELECT key FROM erased_keys);

DELETE FROM lead_details WHERE id IN (SELECT key FROM erased_keys);

DELETE FROM leads WHERE id IN (SELECT key FROM erased_keys);

-- name: erase_counts
-- The rows of the leads of `erased_keys` in the stream's tables in `main`, by table.
SELECT 'lead_history', count(*) FROM lead_history WHERE id IN (SELECT key FROM erased_keys)
UNION ALL
SELECT 'lead_detail_queue', count(*) FROM lead_detail_queue
WHERE id IN (SELECT key FROM erased_keys)
UNION ALL
SELECT 'lead_details', count(*) FROM lead_details WHERE id IN (SELECT key FROM erased_keys)
UNION ALL
SELECT 'leads', count(*) FROM leads WHERE id IN (SELECT key FROM erased_keys);

-- name: funnel
-- Leads by current status, largest first: the lead funnel of the report.
SELECT coalesce(status, '(none)') AS status, count(*) AS leads
FROM leads
GROUP BY ALL
ORDER BY leads DESC, status;

-- name: queue_all
-- A reconciliation queues every lead's details, in the leads' stored order (their history's;
-- see the detail queue's `queued`).
INSERT INTO lead_detail_queue
SELECT id FROM leads WHERE id NOT IN (SELECT id FROM lead_detail_queue) ORDER BY rowid;

-- name: counts
-- The leads stored, and the details still queued.
SELECT (SELECT count(*) FROM leads), (SELECT count(*) FROM lead_detail_queue);

-- name: queued
-- The queued ids, in the order they were queued.
SELECT id FROM lead_detail_queue ORDER BY rowid;

-- name: dequeue
-- Take the ids of a stored batch (registered as `incoming_rows`) off the queue.
DELETE FROM lead_detail_queue WHERE id IN (SELECT id FROM incoming_rows);

-- name: detail_counts
-- The details stored, and of them the leads the upstream answered 404 for.
SELECT count(*), count(*) FILTER (NOT found) FROM lead_details;

-- name: served_detail
-- One lead's details as the read API answers them (none for an unknown id or a 404).
SELECT record FROM lead_details WHERE id = ? AND found;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now): each
-- lead's details as /crm/v1.1/leads/{id} serves them, by the list's Id (a 404 is no record).
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `leads_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO leads_as_of(v) AS TABLE
SELECT id AS key, record FROM lead_details_at(v) WHERE found;

-- name: changed_keys
-- The keys whose record may differ from the last publish's: those of the rows of
-- `lead_details` that changed or went (every record of the stream is one of its rows).
SELECT id AS key FROM lead_details__changed;

-- name: feed_records_now
-- The changes feed's records of the keys `$keys` in a snapshot's own publish, as
-- `leads_as_of(NULL)` gives them, found by row first (as the digital assets' are).
SELECT id AS key, record::VARCHAR FROM lead_details
WHERE rowid IN (
    SELECT rowid FROM lead_details WHERE found AND id IN (SELECT unnest($keys::VARCHAR[]))
);
