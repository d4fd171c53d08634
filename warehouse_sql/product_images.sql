-- The product images mirrored into the bucket by the pim_image_sync job (not a stream).

-- name: tables
-- Product images copied into the bucket under images/<sku>/.
CREATE TABLE IF NOT EXISTS product_images (
    source_url     VARCHAR PRIMARY KEY,
    sku            VARCHAR NOT NULL,
    kind           VARCHAR,
    object_key     VARCHAR,
    md5            VARCHAR,
    size_bytes     BIGINT,
    status         VARCHAR NOT NULL,     -- uploaded, unchanged or failed
    error          VARCHAR,
    synced_at      TIMESTAMPTZ NOT NULL
);

-- name: comments
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

-- name: sources
-- Every image a unit record lists, once per (sku, url): what the image sync mirrors (see
-- product_images.py).
SELECT DISTINCT u.sku, img ->> 'url', img ->> 'kind'
FROM units AS u, unnest(CAST(u.record -> 'images' AS JSON[])) AS t(img)
WHERE img ->> 'url' IS NOT NULL
ORDER BY 1, 2;

-- name: mirrored
-- The images already in the object store, by source URL: their MD5 and object key let the image
-- sync skip an upload whose bytes are unchanged (see product_images.py).
SELECT source_url, md5, object_key
FROM product_images
WHERE status IN ('uploaded', 'unchanged');
