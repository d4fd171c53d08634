-- Every image a unit record lists, once per (sku, url): what the image sync mirrors (see
-- product_images.py).
SELECT DISTINCT u.sku, img ->> 'url', img ->> 'kind'
FROM units AS u, unnest(CAST(u.record -> 'images' AS JSON[])) AS t(img)
WHERE img ->> 'url' IS NOT NULL
ORDER BY 1, 2;
