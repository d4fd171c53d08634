"""Jobs and schedules: what runs together, and when, from the streams' cadences."""

from __future__ import annotations

import dagster as dg

from assets.erasure import forget_job
from assets.notifications import PUBLISH_ASSETS
from assets.product_images import IMAGE_JOB
from ductwork.settings import RunSettings, load
from ductwork.streams.registry import CADENCES, STREAMS, Cadence, streams_of

# Every asset of a run executes in one process, one after another: each asset already
# overlaps its own requests, and DuckDB accepts a single writer.
EXECUTOR = dg.in_process_executor
IMAGES = dg.AssetSelection.assets(IMAGE_JOB.asset)
EVERY_STREAM = dg.AssetSelection.all() - IMAGES
# Publishing, then telling subscribers what the publish changed.
PUBLISH = dg.AssetSelection.assets(*PUBLISH_ASSETS)
# A reconciliation runs every step that can reconcile in that mode.
RECONCILE_CONFIG = {
    "ops": {
        step.asset if step.batch is None else step.batch: {"config": {"mode": "reconcile"}}
        for stream in STREAMS
        for step in stream.steps
        if "mode" in step.reader.options
    }
}
# Scheduled syncs are the product's main use: they run wherever the daemon runs, unless
# DUCTWORK_SCHEDULES=off.
SCHEDULE_STATUS = (
    dg.DefaultScheduleStatus.STOPPED
    if load(RunSettings).schedules == "off"
    else dg.DefaultScheduleStatus.RUNNING
)

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
pim_image_sync_job = dg.define_asset_job(
    IMAGE_JOB.job,
    selection=IMAGES,
    description=IMAGE_JOB.description,
    executor_def=EXECUTOR,
)


def cadence_job(cadence: Cadence) -> dg.UnresolvedAssetJobDefinition:
    """The job that syncs every stream of ``cadence``, then publishes."""
    streams = streams_of(cadence)
    assets = [asset for stream in streams for asset in stream.assets]
    names = ", ".join(stream.name for stream in streams)
    return dg.define_asset_job(
        cadence.job or "",
        selection=dg.AssetSelection.assets(*assets) | PUBLISH,
        description=f"{names.capitalize()} ({cadence.name}), then publish a snapshot.",
        executor_def=EXECUTOR,
    )


CADENCE_JOBS = {cadence: cadence_job(cadence) for cadence in CADENCES if cadence.job}
SCHEDULES = [
    *(
        dg.ScheduleDefinition(
            name=cadence.schedule, job=job, cron_schedule=cadence.cron or "",
            description=f"{job.description}", default_status=SCHEDULE_STATUS,
        )
        for cadence, job in CADENCE_JOBS.items()
        if cadence.schedule
    ),
    dg.ScheduleDefinition(
        name="reconcile_nightly", job=reconcile_job, cron_schedule="30 2 * * *",
        description="Nightly reconciliation of every stream.", default_status=SCHEDULE_STATUS,
    ),
    dg.ScheduleDefinition(
        name=IMAGE_JOB.schedule, job=pim_image_sync_job, cron_schedule=IMAGE_JOB.cron,
        description="Nightly product-image mirror.", default_status=SCHEDULE_STATUS,
    ),
]  # fmt: skip
JOBS = [sync_all_job, reconcile_job, *CADENCE_JOBS.values(), pim_image_sync_job, forget_job]
