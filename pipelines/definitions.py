"""The Dagster code location of ductwork: assets, jobs, schedules and resources."""

from __future__ import annotations

import dagster as dg

from assets.catalog import CATALOG_CHECKS
from assets.crm import CRM_CHECKS
from assets.internal import INTERNAL_CHECKS, product_images
from assets.serving import SYNCED_ASSETS, serving_snapshot
from assets.warehouse import WAREHOUSE_CHECKS
from pipelines.jobs import JOBS, SCHEDULES
from pipelines.resources import default_resources
from pipelines.sensors import SENSORS

SYNCED_AND_PUBLISHED = [*SYNCED_ASSETS, serving_snapshot]
ALL_ASSETS = [*SYNCED_AND_PUBLISHED, product_images]
ALL_CHECKS = [*CATALOG_CHECKS, *WAREHOUSE_CHECKS, *CRM_CHECKS, *INTERNAL_CHECKS]

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=default_resources(),
)
