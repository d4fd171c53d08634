"""One ductwork sync (every stream, then the snapshot publish) in a process of its own.

The parent measures this process's wall time and peak RSS; this prints, as one JSON line, the
sync's own wall time, the publish step's duration and each asset's requests and rows. With
``--through-instance`` the sync is the ``sync_all`` job on the Dagster instance under
``--home``, as ``ductwork sync`` runs it, and only its wall time is reported.

    uv run python -m bench.sync_child --home DIR --url URL --api-key KEY --s3-url URL
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import dagster as dg

BUCKET = "ductwork-bench"


def sync_once(home: Path, url: str, api_key: str, s3_url: str) -> dict:
    """Materialise every synced asset and the snapshot, as ``ductwork sync`` does."""

    from assets.resources import resources_for_home
    from ductwork.settings import S3Settings
    from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED

    s3 = S3Settings(s3_endpoint_url=s3_url, s3_bucket=BUCKET)
    resources = resources_for_home(home, url, api_key, s3)
    started = time.perf_counter()
    result = dg.materialize([*SYNCED_AND_PUBLISHED, *ALL_CHECKS], resources=resources)
    seconds = time.perf_counter() - started
    if not result.success:
        raise SystemExit("the sync failed")
    assets = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        values = {k: v.value for k, v in materialization.metadata.items()}
        assets[materialization.asset_key.path[-1]] = {
            "requests": values.get("requests"),
            "rows": values.get("dagster/row_count"),
        }
    steps = {
        event.step_key: event.event_specific_data.duration_ms / 1000
        for event in result.get_step_success_events()
    }
    return {
        "seconds": seconds,
        "publish_s": steps.get("serving_snapshot"),
        "steps": steps,
        "assets": assets,
    }


def sync_through_instance(home: Path, url: str, api_key: str, s3_url: str) -> dict:
    """The ``sync_all`` job the way ``ductwork sync`` runs it: on the Dagster instance kept
    under the data folder, whose event log is SQLite on disk (``sync_once`` runs on an
    ephemeral in-memory instance)."""
    from ductwork.settings import HomeSettings, load, upstream_environment

    os.environ.update(DUCTWORK_HOME=str(home), **upstream_environment(url, api_key, s3_url, BUCKET))
    from pipelines.instance import prepare_dagster_home
    from pipelines.sync_command import run_job

    # The code location is loaded before the clock starts, as in ``sync_once``.
    prepare_dagster_home(load(HomeSettings).dagster_home)
    import pipelines.definitions  # noqa: F401

    started = time.perf_counter()
    if run_job("sync_all").exit_code != 0:
        raise SystemExit("the sync failed")
    return {"seconds": time.perf_counter() - started, "publish_s": None, "steps": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--s3-url", required=True)
    parser.add_argument(
        "--through-instance",
        action="store_true",
        help="run the sync_all job on the instance under --home, as `ductwork sync` does",
    )
    options = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    sync = sync_through_instance if options.through_instance else sync_once
    report = sync(options.home, options.url, options.api_key, options.s3_url)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
