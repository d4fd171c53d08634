"""A reference for the no-change sync: one Dagster run of a single asset that does nothing.

It runs on an instance set up exactly as ``ductwork sync`` sets up its own (``dagster.yaml``
written by ductwork, the held SQLite event log), in a folder of its own, and is started the
same way (``uv run``). So it costs what any run costs before any of ductwork's work: importing
Dagster and its storage, building a job, creating the run and storing its events. The suite
times it beside the start-up floor and the no-change syncs; it carries no target.

    uv run --frozen python -m bench.noop_run DAGSTER_HOME
"""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg
import duckdb  # noqa: F401 (imported as the sync and the start-up floor import it)

from pipelines.instance import prepare_dagster_home, run_instance


@dg.asset
def nothing() -> None:
    """Materialises nothing."""


def main() -> int:
    home = prepare_dagster_home(Path(sys.argv[1]))
    job = dg.define_asset_job("noop", selection=[nothing])
    defs = dg.Definitions(assets=[nothing], jobs=[job])
    with run_instance(home) as instance:
        result = defs.resolve_job_def("noop").execute_in_process(
            instance=instance,
            # `ductwork sync` prints its own step lines, not Dagster's console log.
            run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
        )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
