"""``ductwork report``: charts of the streams and the lead funnel, as one HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands, add_force_option


def add(sub: Subcommands) -> None:
    """``ductwork report``."""
    report = sub.add_parser("report", help="Charts of the streams and the lead funnel (HTML).")
    report.add_argument("--out", type=Path, default=Path("ductwork-report.html"))
    add_force_option(report)
    report.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Write the report."""
    from pipelines.report import write_report

    home = load(HomeSettings)
    return write_report(home.dagster_home, home.snapshots_dir, options.out, force=options.force)
