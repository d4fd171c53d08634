"""The Dagster code location of ductwork: assets, jobs, schedules and resources."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from assets.catalog import CATALOG_CHECKS, CATALOG_KEYS
from assets.checks import grouped_checks
from assets.crm import CRM_CHECKS, crm_lead_details, crm_leads
from assets.digital_assets import DIGITAL_ASSET_CHECKS, warehouse_digital_assets
from assets.internal import INTERNAL_ASSETS, INTERNAL_CHECKS
from assets.product_images import product_images
from assets.resources import default_resources
from assets.serving import SYNCED_ASSETS, SYNCED_KEYS, serving_snapshot
from assets.stream_checks import (
    complete_against_upstream,
    cursor_only_moves_forward,
    no_large_shrink,
)
from assets.submittals import SUBMITTAL_CHECKS, warehouse_submittals
from assets.table_metadata import with_table_metadata
from pipelines.jobs import JOBS, SCHEDULES
from pipelines.run_progress import progress_logger
from pipelines.sensors import SENSORS

SYNCED_AND_PUBLISHED = [*SYNCED_ASSETS, serving_snapshot]
ALL_ASSETS = [*SYNCED_AND_PUBLISHED, product_images]
# Blocking checks that compare a run with the previous one or with the upstream's totals.
STREAM_CHECKS = [
    *(no_large_shrink(key) for key in SYNCED_KEYS),
    cursor_only_moves_forward(crm_leads.key),
    # Only the digital assets: a catalog list is stored only when its read found exactly the
    # total every page reported (``read_whole_list``), so there the check could never fail.
    complete_against_upstream(warehouse_digital_assets.key),
]
CHECK_RULES = [
    *CATALOG_CHECKS,
    *DIGITAL_ASSET_CHECKS,
    *SUBMITTAL_CHECKS,
    *CRM_CHECKS,
    *INTERNAL_CHECKS,
    *STREAM_CHECKS,
]
# Three check steps instead of one per check (see assets/checks.py). No group holds an asset
# together with one that depends on it, so a blocking check still runs before whatever depends
# on its asset: the lead list's checks before the lead details, the catalog's before the
# submittals and the product images.
ALL_CHECKS = [
    grouped_checks("catalog_checks", [r for r in CHECK_RULES if r.asset in CATALOG_KEYS]),
    grouped_checks("crm_leads_checks", [r for r in CHECK_RULES if r.asset == crm_leads.key]),
    grouped_checks(
        "stream_checks",
        [r for r in CHECK_RULES if r.asset not in CATALOG_KEYS and r.asset != crm_leads.key],
    ),
]
# Freshness per stream: each schedule's period with room for a late run (warn) and for a
# missed one (fail). Dagster evaluates these policies itself and shows them on every asset.
HOURLY = CATALOG_KEYS
EVERY_15_MINUTES = [warehouse_digital_assets.key, crm_leads.key, crm_lead_details.key]
NIGHTLY = [warehouse_submittals.key, *(asset.key for asset in INTERNAL_ASSETS), product_images.key]
FRESHNESS = [
    (HOURLY, timedelta(hours=1, minutes=30), timedelta(hours=3)),
    (EVERY_15_MINUTES, timedelta(minutes=35), timedelta(hours=1)),
    (NIGHTLY, timedelta(hours=25), timedelta(hours=49)),
]
POLICIES = {
    key: dg.FreshnessPolicy.time_window(fail_window=fail_after, warn_window=warn_after)
    for keys, warn_after, fail_after in FRESHNESS
    for key in keys
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
