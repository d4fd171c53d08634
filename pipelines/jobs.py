"""Jobs and schedules: what runs together, and when."""

from __future__ import annotations

import dagster as dg

from ductwork.settings import RunSettings, load

# Every asset of a run executes in one process, one after another: each asset already
# overlaps its own requests, and DuckDB accepts a single writer.
EXECUTOR = dg.in_process_executor
IMAGES = dg.AssetSelection.assets("product_images")
EVERY_STREAM = dg.AssetSelection.all() - IMAGES
PUBLISH = dg.AssetSelection.assets("serving_snapshot")
RECONCILE_CONFIG = {
    "ops": {
        name: {"config": {"mode": "reconcile"}}
        for name in ("warehouse_digital_assets", "warehouse_submittals", "crm_leads")
    }
}

sync_all_job = dg.define_asset_job(
    "sync_all",
    selection=EVERY_STREAM,
    description="Every stream (incremental where it can be), then publish a serving snapshot.",
    executor_def=EXECUTOR,
)
reconcile_job = dg.define_asset_job(
    "reconcile_all",
    selection=EVERY_STREAM,
    config=RECONCILE_CONFIG,
    description="Full listings of every stream: deletions detected, every lead re-read.",
    executor_def=EXECUTOR,
)
catalog_sync_job = dg.define_asset_job(
    "catalog_sync",
    selection=dg.AssetSelection.groups("catalog") | PUBLISH,
    description="Product list, the six unit lists and pairings, then publish a snapshot.",
    executor_def=EXECUTOR,
)
fast_streams_job = dg.define_asset_job(
    "assets_and_leads_sync",
    selection=dg.AssetSelection.assets("warehouse_digital_assets", "crm_leads", "crm_lead_details")
    | PUBLISH,
    description="Digital assets and leads, incrementally, then publish a snapshot.",
    executor_def=EXECUTOR,
)
pim_image_sync_job = dg.define_asset_job(
    "pim_image_sync",
    selection=IMAGES,
    description="Start the upstream's image sync, then mirror product images into the bucket.",
    executor_def=EXECUTOR,
)

# Scheduled syncs are the product's main use: they run wherever the daemon runs, unless
# DUCTWORK_SCHEDULES=off.
SCHEDULE_STATUS = (
    dg.DefaultScheduleStatus.STOPPED
    if load(RunSettings).schedules == "off"
    else dg.DefaultScheduleStatus.RUNNING
)
SCHEDULES = [
    dg.ScheduleDefinition(
        name="catalog_hourly", job=catalog_sync_job, cron_schedule="7 * * * *",
        description="Catalog and pairings every hour.", default_status=SCHEDULE_STATUS,
    ),
    dg.ScheduleDefinition(
        name="assets_and_leads_every_15_minutes", job=fast_streams_job,
        cron_schedule="*/15 * * * *",
        description="Digital assets and leads every 15 minutes, incrementally.",
        default_status=SCHEDULE_STATUS,
    ),
    dg.ScheduleDefinition(
        name="reconcile_nightly", job=reconcile_job, cron_schedule="30 2 * * *",
        description="Nightly reconciliation of every stream.", default_status=SCHEDULE_STATUS,
    ),
    dg.ScheduleDefinition(
        name="pim_image_sync_nightly", job=pim_image_sync_job, cron_schedule="0 4 * * *",
        description="Nightly product-image mirror.", default_status=SCHEDULE_STATUS,
    ),
]  # fmt: skip
JOBS = [sync_all_job, reconcile_job, catalog_sync_job, fast_streams_job, pim_image_sync_job]
