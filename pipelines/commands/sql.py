"""``ductwork sql``: SQL on the current snapshot, read-only."""

from __future__ import annotations

import argparse
from pathlib import Path

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands, add_force_option


def add(sub: Subcommands) -> None:
    """``ductwork sql``."""
    sql = sub.add_parser("sql", help="Run SQL on the current snapshot (read-only).")
    sql.add_argument("query")
    sql.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    sql.add_argument(
        "--output", type=Path, default=None, help="Write to this new file (required for parquet)."
    )
    add_force_option(sql)
    sql.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Run the query and print or write its answer."""
    from pipelines.analyst_sql import run_query

    return run_query(
        options.query,
        options.format,
        load(HomeSettings).snapshots_dir,
        options.output,
        force=options.force,
    )
