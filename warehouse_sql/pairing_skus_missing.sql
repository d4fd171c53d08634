-- SKUs named by pairings that the product catalog does not hold.
SELECT DISTINCT pp.sku
FROM pairing_products AS pp
LEFT JOIN catalog_items AS c ON c.sku = pp.sku
WHERE pp.sku IS NOT NULL AND c.sku IS NULL
ORDER BY pp.sku;
