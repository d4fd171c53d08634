"""``ductwork run-job``: one Dagster job of ductwork, by name."""

from __future__ import annotations

import argparse

from pipelines.commands.arguments import Subcommands, writes_data_folder


def add(sub: Subcommands) -> None:
    """``ductwork run-job``."""
    run_job = sub.add_parser("run-job", help="Run one Dagster job of ductwork by name.")
    run_job.add_argument("job", help="e.g. pim_image_sync, catalog_sync, reconcile_all")
    run_job.add_argument("--run-id", default=None, help="Use this run id (a UUID).")
    run_job.add_argument(
        "--verbose", action="store_true", help="Also print Dagster's whole event stream."
    )
    run_job.set_defaults(run=run)
    writes_data_folder(run_job, runs_a_job=True)


def run(options: argparse.Namespace) -> int:
    """Run the job; its exit code."""
    from pipelines.sync_command import run_job

    outcome = run_job(options.job, publish=False, run_id=options.run_id, verbose=options.verbose)
    return outcome.exit_code
