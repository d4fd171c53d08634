-- CRM family: the lead list (cursor-paged by CreatedDate, Id) and lead details.

CREATE TABLE IF NOT EXISTS leads (
    id                 VARCHAR PRIMARY KEY,
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
    id                   VARCHAR PRIMARY KEY,
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
-- one opens. Written in the transactions that upsert `leads` and `lead_details`.
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
