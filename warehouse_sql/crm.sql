-- CRM family: the lead list (cursor-paged by CreatedDate, Id) and lead details.

CREATE TABLE IF NOT EXISTS leads (
    id                 VARCHAR PRIMARY KEY,
    created_at         TIMESTAMPTZ,
    created_date_text  VARCHAR,          -- CreatedDate exactly as received (the cursor's first half)
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
CREATE TABLE IF NOT EXISTS lead_detail_queue (
    id  VARCHAR PRIMARY KEY
);
