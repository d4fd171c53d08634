-- The images already in the object store, by source URL: their MD5 and object key let the image
-- sync skip an upload whose bytes are unchanged (see product_images.py).
SELECT source_url, md5, object_key
FROM product_images
WHERE status IN ('uploaded', 'unchanged');
