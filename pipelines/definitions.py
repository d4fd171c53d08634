"""The Dagster code location of ductwork: assets, jobs, schedules and resources."""

from __future__ import annotations

import dagster as dg

from assets.serving import SYNCED_ASSETS, serving_snapshot
from pipelines.jobs import JOBS, SCHEDULES
from pipelines.resources import default_resources

ALL_ASSETS = [*SYNCED_ASSETS, serving_snapshot]

defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=JOBS,
    schedules=SCHEDULES,
    resources=default_resources(),
)
