-- The data dictionary's text: a comment on every table and column of the warehouse, applied to
-- every published snapshot (views carry theirs in analyst_views.sql). `ductwork docs` reads them
-- back from DuckDB's catalog; a test fails when a table or column of a snapshot has none.

-- catalog.sql
COMMENT ON TABLE catalog_items IS 'The product list (/products/v2.0/products): one row per SKU.';
COMMENT ON COLUMN catalog_items.sku IS 'Product SKU (brand model number).';
COMMENT ON COLUMN catalog_items.srn IS 'Product SRN.';
COMMENT ON COLUMN catalog_items.unit_type IS 'Route slug of the typed unit list, e.g. indoor-units.';
COMMENT ON COLUMN catalog_items.href IS '_links.self.href as received (SKU percent-encoded).';
COMMENT ON COLUMN catalog_items.record IS 'The list item exactly as received (JSON).';
COMMENT ON COLUMN catalog_items.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE units IS 'Full unit records of the six typed unit lists (indoor, outdoor, branch controllers, branch boxes, ventilation, accessories).';
COMMENT ON COLUMN units.unit_type IS 'The typed list the record came from, e.g. outdoor-units.';
COMMENT ON COLUMN units.sku IS 'Unit SKU.';
COMMENT ON COLUMN units.srn IS 'Unit SRN (used by submittal requests).';
COMMENT ON COLUMN units.brand IS 'Brand name.';
COMMENT ON COLUMN units.category IS 'INDOOR or OUTDOOR.';
COMMENT ON COLUMN units.subcategory IS 'Subcategory, e.g. Wall Mounted.';
COMMENT ON COLUMN units.series_name IS 'series.name.';
COMMENT ON COLUMN units.family_name IS 'family.name.';
COMMENT ON COLUMN units.description IS 'Free-text description.';
COMMENT ON COLUMN units.status IS 'Active or Discontinued.';
COMMENT ON COLUMN units.updated_at IS 'The record''s updatedAt.';
COMMENT ON COLUMN units.record IS 'The unit record exactly as received (JSON), with specifications and performance.';
COMMENT ON COLUMN units.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE pairings IS 'Product relationships (pairings, standalone units, combinations).';
COMMENT ON COLUMN pairings.relationship_id IS 'relationshipId.';
COMMENT ON COLUMN pairings.rel_type IS 'Pairing, Standalone or Combinations.';
COMMENT ON COLUMN pairings.updated_at IS 'The pairing''s updatedAt.';
COMMENT ON COLUMN pairings.record IS 'The pairing exactly as received (JSON).';
COMMENT ON COLUMN pairings.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE pairing_products IS 'One row per product slot of a pairing; the SKU may name a product the catalog lacks.';
COMMENT ON COLUMN pairing_products.relationship_id IS 'The pairing''s relationshipId.';
COMMENT ON COLUMN pairing_products.position IS 'Slot: P1, P2 or P3.';
COMMENT ON COLUMN pairing_products.sku IS 'SKU in the slot.';
COMMENT ON COLUMN pairing_products.srn IS 'SRN in the slot.';
COMMENT ON COLUMN pairing_products.unit_type IS 'Unit list of the product, e.g. indoor-units.';

-- warehouse.sql
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

-- crm.sql
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

-- internal.sql
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

COMMENT ON TABLE indoor_models IS 'The indoor models list, in the upstream''s order.';
COMMENT ON COLUMN indoor_models.ordinal IS 'Position in the upstream''s answer.';
COMMENT ON COLUMN indoor_models.model IS 'Model name.';
COMMENT ON COLUMN indoor_models.sku IS 'SKU.';
COMMENT ON COLUMN indoor_models.series IS 'Series name.';
COMMENT ON COLUMN indoor_models.family IS 'Family name.';
COMMENT ON COLUMN indoor_models.capacity_btuh IS 'Capacity, BTU/h.';
COMMENT ON COLUMN indoor_models.record IS 'The item exactly as received (JSON).';
COMMENT ON COLUMN indoor_models.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE manuals IS 'Objects under manuals/ in the bucket, as /internal/v1.0/digital-assets lists them.';
COMMENT ON COLUMN manuals.key IS 'Object key.';
COMMENT ON COLUMN manuals.size_bytes IS 'Object size.';
COMMENT ON COLUMN manuals.last_modified IS 'Object last-modified time.';
COMMENT ON COLUMN manuals.etag IS 'Object ETag.';
COMMENT ON COLUMN manuals.content_type IS 'Content type.';
COMMENT ON COLUMN manuals.url IS 'Object URL.';
COMMENT ON COLUMN manuals.record IS 'The listing item exactly as served (JSON).';
COMMENT ON COLUMN manuals.synced_at IS 'When the sync stored the row.';

COMMENT ON TABLE product_images IS 'Product images copied into the bucket under images/<sku>/.';
COMMENT ON COLUMN product_images.source_url IS 'Image URL in the catalog record.';
COMMENT ON COLUMN product_images.sku IS 'SKU of the product.';
COMMENT ON COLUMN product_images.kind IS 'hero or gallery.';
COMMENT ON COLUMN product_images.object_key IS 'Key of the copy in the bucket.';
COMMENT ON COLUMN product_images.md5 IS 'MD5 of the image bytes.';
COMMENT ON COLUMN product_images.size_bytes IS 'Image size.';
COMMENT ON COLUMN product_images.status IS 'uploaded, unchanged or failed.';
COMMENT ON COLUMN product_images.error IS 'Why the copy failed, if it did.';
COMMENT ON COLUMN product_images.synced_at IS 'When the sync stored the row.';

-- sync_state.sql
COMMENT ON TABLE stream_state IS 'Bookmarks of incremental streams, and digests of what whole-list streams last stored (under the stream name plus `.content`, and their schema-drift counts under `.drift`), written with the rows they cover; `warehouse.schema` holds the digest of the DDL last applied.';
COMMENT ON COLUMN stream_state.stream IS 'Stream (asset) name.';
COMMENT ON COLUMN stream_state.bookmark IS 'Where the next incremental run resumes, or a whole list''s digest (of its raw page bodies) and row count (JSON).';
COMMENT ON COLUMN stream_state.updated_at IS 'When the bookmark moved.';
COMMENT ON TABLE digital_asset_walk_ids IS 'Asset ids listed so far by an unfinished digital-asset page walk (an id listed twice appears twice); emptied when the walk ends.';
COMMENT ON COLUMN digital_asset_walk_ids.asset_id IS 'assetId listed by the walk in progress.';
