"""Jobs and schedules: what runs together, and when."""

from __future__ import annotations

import dagster as dg

from assets.catalog import CATALOG_ASSETS
from assets.serving import serving_snapshot

# Every asset of a run executes in one process, one after another: each asset already
# overlaps its own requests, and DuckDB accepts a single writer.
sync_all_job = dg.define_asset_job(
    "sync_all",
    selection=dg.AssetSelection.all(),
    description="Full sync of every stream, then publish a serving snapshot.",
    executor_def=dg.in_process_executor,
)

catalog_sync_job = dg.define_asset_job(
    "catalog_sync",
    selection=dg.AssetSelection.assets(*CATALOG_ASSETS, serving_snapshot),
    description="Product list, the six unit lists and pairings, then publish a snapshot.",
    executor_def=dg.in_process_executor,
)

catalog_hourly = dg.ScheduleDefinition(
    name="catalog_hourly",
    job=catalog_sync_job,
    cron_schedule="7 * * * *",
    description="Catalog and pairings every hour.",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)

JOBS = [sync_all_job, catalog_sync_job]
SCHEDULES = [catalog_hourly]
