"""The Dagster code location of ductwork: assets, checks, jobs, schedules and resources, all
made from the registry of streams (``ductwork.streams``)."""

from __future__ import annotations

import dagster as dg

from assets.checks import STREAM_CHECKS
from assets.notifications import change_notifications
from assets.product_images import IMAGE_FRESHNESS, product_images
from assets.publish import serving_snapshot
from assets.resources import default_resources
from assets.streams import STREAM_ASSETS
from assets.table_metadata import with_table_metadata
from ductwork.streams.registry import STREAMS
from pipelines.jobs import JOBS, SCHEDULES
from pipelines.run_progress import progress_logger
from pipelines.sensors import SENSORS

SYNCED_AND_PUBLISHED = [*STREAM_ASSETS, serving_snapshot]
ALL_ASSETS = [*SYNCED_AND_PUBLISHED, change_notifications, product_images]
ALL_CHECKS = STREAM_CHECKS
# Freshness per stream: its cadence's period with room for a late run (warn) and for a missed
# one (fail). Dagster evaluates these policies itself and shows them on every asset.
POLICIES = {
    **{
        dg.AssetKey(asset): dg.FreshnessPolicy.time_window(
            fail_window=stream.cadence.fail_after, warn_window=stream.cadence.warn_after
        )
        for stream in STREAMS
        for asset in stream.assets
    },
    product_images.key: IMAGE_FRESHNESS,
}


def _with_freshness(spec: dg.AssetSpec) -> dg.AssetSpec:
    policy = POLICIES.get(spec.key)
    return spec if policy is None else dg.apply_freshness_policy(spec, policy)


defs = dg.Definitions(
    assets=[
        asset.map_asset_specs(_with_freshness).map_asset_specs(with_table_metadata)
        for asset in ALL_ASSETS
    ],
    asset_checks=ALL_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=default_resources(),
    loggers={**dg.default_loggers(), "progress": progress_logger},
)
