"""The Dagster code location of ductwork: assets, jobs, schedules and resources."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from assets.catalog import CATALOG_ASSETS, CATALOG_CHECKS
from assets.checks import grouped_checks
from assets.crm import CRM_CHECKS, crm_lead_details, crm_leads
from assets.internal import INTERNAL_ASSETS, INTERNAL_CHECKS, product_images
from assets.serving import SYNCED_ASSETS, serving_snapshot
from assets.stream_checks import (
    complete_against_upstream,
    cursor_only_moves_forward,
    no_large_shrink,
)
from assets.warehouse import WAREHOUSE_CHECKS, warehouse_digital_assets, warehouse_submittals
from pipelines.jobs import JOBS, SCHEDULES
from pipelines.resources import default_resources
from pipelines.sensors import SENSORS

SYNCED_AND_PUBLISHED = [*SYNCED_ASSETS, serving_snapshot]
ALL_ASSETS = [*SYNCED_AND_PUBLISHED, product_images]
# Blocking checks that compare a run with the previous one or with the upstream's totals.
STREAM_CHECKS = [
    *(no_large_shrink(asset) for asset in SYNCED_ASSETS),
    cursor_only_moves_forward(crm_leads),
    *(complete_against_upstream(asset) for asset in [*CATALOG_ASSETS, warehouse_digital_assets]),
]
CHECK_RULES = [*CATALOG_CHECKS, *WAREHOUSE_CHECKS, *CRM_CHECKS, *INTERNAL_CHECKS, *STREAM_CHECKS]
# Three check steps instead of one per check (see assets/checks.py). No group holds an asset
# together with one that depends on it, so a blocking check still runs before whatever depends
# on its asset: the lead list's checks before the lead details, the catalog's before the
# submittals and the product images.
ALL_CHECKS = [
    grouped_checks("catalog_checks", [r for r in CHECK_RULES if r[0] in CATALOG_ASSETS]),
    grouped_checks("crm_leads_checks", [r for r in CHECK_RULES if r[0] is crm_leads]),
    grouped_checks(
        "stream_checks",
        [r for r in CHECK_RULES if r[0] not in CATALOG_ASSETS and r[0] is not crm_leads],
    ),
]
# Freshness per stream: each schedule's period with room for a late run (warn) and for a
# missed one (fail). Dagster evaluates these policies itself and shows them on every asset.
HOURLY = CATALOG_ASSETS
EVERY_15_MINUTES = [warehouse_digital_assets, crm_leads, crm_lead_details]
NIGHTLY = [warehouse_submittals, *INTERNAL_ASSETS, product_images]
FRESHNESS = [
    (HOURLY, timedelta(hours=1, minutes=30), timedelta(hours=3)),
    (EVERY_15_MINUTES, timedelta(minutes=35), timedelta(hours=1)),
    (NIGHTLY, timedelta(hours=25), timedelta(hours=49)),
]
POLICIES = {
    asset.key: dg.FreshnessPolicy.time_window(fail_window=fail_after, warn_window=warn_after)
    for assets, warn_after, fail_after in FRESHNESS
    for asset in assets
}


def _with_freshness(spec: dg.AssetSpec) -> dg.AssetSpec:
    policy = POLICIES.get(spec.key)
    return spec if policy is None else dg.apply_freshness_policy(spec, policy)


defs = dg.Definitions(
    assets=[asset.map_asset_specs(_with_freshness) for asset in ALL_ASSETS],
    asset_checks=ALL_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=default_resources(),
)
