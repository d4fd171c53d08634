-- Leads by current status, largest first: the lead funnel of the report.
SELECT coalesce(status, '(none)') AS status, count(*) AS leads
FROM leads
GROUP BY ALL
ORDER BY leads DESC, status;
