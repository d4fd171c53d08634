"""A reference for the no-change sync: one Dagster run of a single asset that does nothing.

It runs on an instance set up exactly as ``ductwork sync`` sets up its own (``dagster.yaml``
written by ductwork, the held SQLite event log), in a folder of its own, and is started the
same way (``uv run``). So it costs what any run costs before any of ductwork's work: importing
Dagster and its storage, building a job, creating the run and storing its events. The suite
times it beside the start-up floor and the no-change syncs; it carries no target.

With ``--like-sync`` it first imports ductwork's Dagster definitions, as ``ductwork sync``
does, and the run has as many no-op steps as the ``sync_all`` job: what a sync's Dagster part
costs at least (``bench.storage_floor``).

    uv run --frozen python -m bench.noop_run DAGSTER_HOME [--like-sync]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dagster as dg
import duckdb  # noqa: F401 (imported as the sync and the start-up floor import it)

from pipelines.instance import prepare_dagster_home, run_instance


def no_op_assets(count: int) -> list[dg.AssetsDefinition]:
    """``count`` assets that materialise nothing: ``nothing``, ``nothing_2``, ..."""

    def named(index: int) -> dg.AssetsDefinition:
        @dg.asset(name="nothing" if index == 1 else f"nothing_{index}")
        def nothing() -> None:
            """Materialises nothing."""

        return nothing

    return [named(index) for index in range(1, count + 1)]


def sync_steps() -> int:
    """The steps of the ``sync_all`` job, from ductwork's definitions (imported here)."""
    from pipelines.definitions import defs

    return len(defs.resolve_job_def("sync_all").graph.node_defs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dagster_home", type=Path)
    parser.add_argument(
        "--like-sync", action="store_true", help="as many no-op steps as the sync_all job"
    )
    options = parser.parse_args()
    home = prepare_dagster_home(options.dagster_home)
    assets = no_op_assets(sync_steps() if options.like_sync else 1)
    job = dg.define_asset_job("noop", selection=assets)
    defs = dg.Definitions(assets=assets, jobs=[job])
    with run_instance(home) as instance:
        result = defs.resolve_job_def("noop").execute_in_process(
            instance=instance,
            # `ductwork sync` prints its own step lines, not Dagster's console log.
            run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
        )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
