-- The digital-assets stream: /warehouse/v1.0/digital-assets, incremental on updatedAt.
-- Sections (`-- name: ...`) are read by name: `tables` when a warehouse is opened, `comments`
-- and `views` in every published snapshot; the rest are the stream's statements.

-- name: tables
-- Every digital asset ever listed. Deletions upstream are not announced: a reconciliation
-- that no longer finds an asset sets `deleted_at`; rows are never hard-deleted. No primary
-- key, as for the lead tables (`leads.sql` says why): the blocking check counts repeated ids.
CREATE TABLE IF NOT EXISTS digital_assets (
    asset_id         VARCHAR NOT NULL,
    sku              VARCHAR,
    asset_type       VARCHAR,        -- Manual, Brochure, Spec Sheet, Submittal, Image, Video
    title            VARCHAR,
    url              VARCHAR,
    mime_type        VARCHAR,
    language         VARCHAR,
    file_size_bytes  BIGINT,
    created_at       TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ,
    updated_at_text  VARCHAR,        -- updatedAt exactly as received (the bookmark: its UTC form)
    record           JSON NOT NULL,
    deleted_at       TIMESTAMPTZ,
    synced_at        TIMESTAMPTZ NOT NULL
);

-- Type-2 history of digital assets: one row per version, opened when an asset is first listed
-- or changes, closed (valid_to, is_current = false) by its next version or by its deletion.
-- Written in the transactions that upsert `digital_assets` and mark deletions.
CREATE TABLE IF NOT EXISTS digital_asset_history (
    asset_id         VARCHAR NOT NULL,
    valid_from       TIMESTAMPTZ NOT NULL,
    valid_to         TIMESTAMPTZ,            -- NULL while current
    is_current       BOOLEAN NOT NULL,
    sku              VARCHAR,
    asset_type       VARCHAR,
    title            VARCHAR,
    url              VARCHAR,
    mime_type        VARCHAR,
    language         VARCHAR,
    file_size_bytes  BIGINT,
    updated_at       TIMESTAMPTZ,
    record_hash      VARCHAR NOT NULL        -- md5 of the record as received
);

-- Asset ids listed so far by a digital-asset page walk that has not finished, written with each
-- page: a walk cut short resumes at its next page and still checks that it saw every asset.
-- No primary key, on purpose: DuckDB commits a delete from an indexed table slowly, and the
-- table is emptied at the end of every walk. An id listed twice is stored twice.
CREATE TABLE IF NOT EXISTS digital_asset_walk_ids (
    asset_id     VARCHAR NOT NULL
);

-- name: comments
COMMENT ON TABLE digital_assets IS 'Every warehouse digital asset ever listed; deleted ones keep their row with deleted_at set.';
COMMENT ON COLUMN digital_assets.asset_id IS 'assetId.';
COMMENT ON COLUMN digital_assets.sku IS 'SKU of the product the asset documents.';
COMMENT ON COLUMN digital_assets.asset_type IS 'Manual, Brochure, Spec Sheet, Submittal, Image or Video.';
COMMENT ON COLUMN digital_assets.title IS 'Title.';
COMMENT ON COLUMN digital_assets.url IS 'Download URL.';
COMMENT ON COLUMN digital_assets.mime_type IS 'MIME type.';
COMMENT ON COLUMN digital_assets.language IS 'Language code.';
COMMENT ON COLUMN digital_assets.file_size_bytes IS 'fileSizeBytes.';
COMMENT ON COLUMN digital_assets.created_at IS 'createdAt.';
COMMENT ON COLUMN digital_assets.updated_at IS 'updatedAt (the incremental sync''s bookmark).';
COMMENT ON COLUMN digital_assets.updated_at_text IS 'updatedAt exactly as received.';
COMMENT ON COLUMN digital_assets.record IS 'The asset exactly as received (JSON).';
COMMENT ON COLUMN digital_assets.deleted_at IS 'When a reconciliation found the asset gone upstream; NULL while live.';
COMMENT ON COLUMN digital_assets.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE digital_asset_history IS 'Type-2 history of digital assets: one row per version; deletion closes the current one.';
COMMENT ON COLUMN digital_asset_history.asset_id IS 'assetId.';
COMMENT ON COLUMN digital_asset_history.valid_from IS 'Start of the version: the asset''s updatedAt (never later than the sync).';
COMMENT ON COLUMN digital_asset_history.valid_to IS 'End of the version (next version or deletion); NULL while current.';
COMMENT ON COLUMN digital_asset_history.is_current IS 'True for the live version; a deleted asset has none.';
COMMENT ON COLUMN digital_asset_history.sku IS 'SKU during the version.';
COMMENT ON COLUMN digital_asset_history.asset_type IS 'Asset type during the version.';
COMMENT ON COLUMN digital_asset_history.title IS 'Title during the version.';
COMMENT ON COLUMN digital_asset_history.url IS 'URL during the version.';
COMMENT ON COLUMN digital_asset_history.mime_type IS 'MIME type during the version.';
COMMENT ON COLUMN digital_asset_history.language IS 'Language during the version.';
COMMENT ON COLUMN digital_asset_history.file_size_bytes IS 'File size during the version.';
COMMENT ON COLUMN digital_asset_history.updated_at IS 'The updatedAt of the version''s record.';
COMMENT ON COLUMN digital_asset_history.record_hash IS 'md5 of the record as received; equal hashes mean no change.';

COMMENT ON TABLE digital_asset_walk_ids IS 'Asset ids listed so far by an unfinished digital-asset page walk (an id listed twice appears twice); emptied when the walk ends.';
COMMENT ON COLUMN digital_asset_walk_ids.asset_id IS 'assetId listed by the walk in progress.';

-- name: serving
-- Built inside every published snapshot (never in the working warehouse): the live assets in
-- the contract's order, numbered, so the read API pages by position without sorting. Each
-- position names its row in `digital_assets` by rowid, and the read API reads the record from
-- there: a snapshot's base tables do not change after the copy, and the publish checks that the
-- snapshot's checkpoint moved none of their rows. A published snapshot is never written again.
CREATE TABLE serving_digital_assets AS
SELECT
    (row_number() OVER (ORDER BY updated_at, asset_id) - 1)::BIGINT AS pos,
    epoch_us(updated_at) AS key_us,
    rowid AS row_id
FROM digital_assets
WHERE deleted_at IS NULL
ORDER BY pos;

COMMENT ON TABLE serving_digital_assets IS 'Live digital assets numbered in the contract''s order, for the read API''s paging.';
COMMENT ON COLUMN serving_digital_assets.pos IS 'Position in (updatedAt, assetId) order, from 0.';
COMMENT ON COLUMN serving_digital_assets.key_us IS 'updatedAt in microseconds since the epoch.';
COMMENT ON COLUMN serving_digital_assets.row_id IS 'rowid of the asset in digital_assets (valid in this snapshot only).';

-- name: views
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

-- name: upsert
-- Upsert a batch of digital assets (registered as `incoming_rows`, one row per asset); an older
-- copy of an asset never overwrites a newer one, and a listed asset is no longer deleted. The
-- copies applied are kept in the temp table `applied_assets` for
-- the history_apply section, which runs next in the same transaction and drops it.
-- Only the stored ids and updatedAt are read here, never the stored records: comparing whole
-- stored rows read every record once per batch, which grew a large sync's asset step with the
-- square of its size.
-- `was_stored` marks the assets that had a stored copy: only those have a row to replace or
-- history to close, since rows of both tables are added only by this upsert and
-- the history_apply section, in one transaction, and an asset's row is never removed but
-- here. A batch of assets new to the mirror, as every batch of a full sync is, then leaves both
-- tables unread instead of scanning them whole.
CREATE OR REPLACE TEMP TABLE applied_assets AS
SELECT i.*, d.asset_id IS NOT NULL AS was_stored
FROM incoming_rows AS i
LEFT JOIN digital_assets AS d ON d.asset_id = i.asset_id
WHERE d.asset_id IS NULL OR i.updated_at >= d.updated_at OR d.updated_at IS NULL;

-- A replaced asset is deleted and inserted anew rather than updated in place: DuckDB writes an
-- in-place update of a column back whole at the next checkpoint, so updating a few assets
-- rewrote the whole `record` column.
DELETE FROM digital_assets
WHERE asset_id IN (SELECT asset_id FROM applied_assets WHERE was_stored);

INSERT INTO digital_assets BY NAME SELECT * EXCLUDE (was_stored) FROM applied_assets;

-- name: history_apply
-- New versions in `digital_asset_history` for the assets a batch's upsert applied (the temp
-- table `applied_assets`, which this drops), run in the transaction of that upsert. A version is
-- valid from the asset's updatedAt (never later than now, never before the version it follows);
-- an unchanged record (or an older copy the upsert ignored) opens nothing.
CREATE OR REPLACE TEMP TABLE asset_versions AS
WITH last AS (
    SELECT
        asset_id,
        max(valid_from) AS last_from,
        max(valid_to) AS last_to,
        any_value(record_hash) FILTER (WHERE is_current) AS current_hash
    FROM digital_asset_history
    WHERE asset_id IN (SELECT asset_id FROM applied_assets WHERE was_stored)
    GROUP BY asset_id
)
SELECT
    a.asset_id, a.sku, a.asset_type, a.title, a.url, a.mime_type, a.language,
    a.file_size_bytes, a.updated_at, a.record_hash, a.was_stored,
    greatest(least(coalesce(a.updated_at, now()), now()), last.last_from, last.last_to)
        AS change_at
-- Hashed once per row, here: the filter and the select list both use the hash, and DuckDB
-- computes an expression written out in each of them twice.
FROM (SELECT *, md5(record::VARCHAR) AS record_hash FROM applied_assets) AS a
LEFT JOIN last ON last.asset_id = a.asset_id
WHERE last.current_hash IS DISTINCT FROM a.record_hash;

UPDATE digital_asset_history AS h SET valid_to = v.change_at, is_current = false
FROM (SELECT * FROM asset_versions WHERE was_stored) AS v
WHERE h.asset_id = v.asset_id AND h.is_current;

INSERT INTO digital_asset_history BY NAME
SELECT
    asset_id, change_at AS valid_from, NULL AS valid_to, true AS is_current, sku, asset_type,
    title, url, mime_type, language, file_size_bytes, updated_at, record_hash
FROM asset_versions;

DROP TABLE asset_versions;
DROP TABLE applied_assets;

-- name: walk_ids_add
-- Remember the ids that pages of a digital-asset page walk listed (the list parameter). An id
-- listed again (its updatedAt moved while the walk went on) is stored again: skipping ids
-- already present scanned the whole table for every page, which grew a large sync's asset step
-- with the square of its size. Readers count distinct ids.
INSERT INTO digital_asset_walk_ids
SELECT DISTINCT listed.asset_id
FROM unnest(?::VARCHAR[]) AS listed(asset_id);

-- name: walk_last
-- The newest (updatedAt, assetId) among the assets a finished page walk listed: where the
-- stream's bookmark moves to. Ordered by the instant, not the text: the upstream may write
-- instants in more than one form (the caller normalises the text it returns).
SELECT a.updated_at_text, a.asset_id
FROM digital_assets AS a
JOIN digital_asset_walk_ids AS w USING (asset_id)
WHERE a.updated_at_text IS NOT NULL
ORDER BY a.updated_at DESC NULLS LAST, a.asset_id DESC
LIMIT 1;

-- name: mark_deleted
-- After a complete listing (registered as `listed_ids`): live assets missing from it were
-- deleted upstream. Their current history versions close, then they are marked; returns how
-- many were marked.
UPDATE digital_asset_history SET valid_to = greatest(now(), valid_from), is_current = false
WHERE is_current
  AND asset_id IN (
      SELECT asset_id FROM digital_assets
      WHERE deleted_at IS NULL AND asset_id NOT IN (SELECT listed_id FROM listed_ids)
  );

UPDATE digital_assets SET deleted_at = now()
WHERE deleted_at IS NULL
  AND asset_id NOT IN (SELECT listed_id FROM listed_ids);

-- name: walk_ids_clear
DELETE FROM digital_asset_walk_ids;

-- name: walk_ids_distinct
SELECT count(DISTINCT asset_id) FROM digital_asset_walk_ids;

-- name: live
-- The live assets: the step's row count.
SELECT count(*) FROM digital_assets WHERE deleted_at IS NULL;

-- name: as_of
-- The stream's records as the changes feed carries them, at publish `v` (NULL: now): the
-- live assets (a deleted one is gone).
-- Created at every publish, after the macros of its tables (`<table>_at(v)`, made by the
-- publish from the history it keeps); an analyst asks `digital_assets_as_of(publish_seq(TIMESTAMPTZ
-- '...'))`.
CREATE OR REPLACE MACRO digital_assets_as_of(v) AS TABLE
SELECT asset_id AS key, record FROM digital_assets_at(v) WHERE deleted_at IS NULL;

-- name: changed_keys
-- The keys whose record may differ from the last publish's: those of the rows of
-- `digital_assets` that changed or went (every record of the stream is one of its rows).
SELECT asset_id AS key FROM digital_assets__changed;

-- name: feed_records_now
-- The changes feed's records of the keys `$keys` in a snapshot's own publish: those that
-- `digital_assets_as_of(NULL)` gives. Their rows are found first, so only their records are
-- read: filtering the macro on the keys read every record of the table, about twice the time.
SELECT asset_id AS key, record::VARCHAR FROM digital_assets
WHERE rowid IN (
    SELECT rowid FROM digital_assets
    WHERE deleted_at IS NULL AND asset_id IN (SELECT unnest($keys::VARCHAR[]))
);
