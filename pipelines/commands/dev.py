"""``ductwork dev``: the Dagster UI on the data folder's instance."""

from __future__ import annotations

import argparse
import os
import sys

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands, writes_data_folder


def add(sub: Subcommands) -> None:
    """``ductwork dev``."""
    dev = sub.add_parser("dev", help="The Dagster UI on the instance under DUCTWORK_HOME.")
    dev.add_argument("--port", type=int, default=3000, help="The UI's port on 127.0.0.1.")
    dev.set_defaults(run=run)
    writes_data_folder(dev)


def run(options: argparse.Namespace) -> int:
    """Run the UI until stopped; 2 when its port is taken."""
    from pipelines.instance import prepare_dagster_home
    from pipelines.processes import WORKSPACE, installed_command, run_until_stopped, taken_port

    host = "127.0.0.1"
    taken = taken_port(host, [("Dagster UI", options.port)])
    if taken is not None:
        print(f"ductwork: {taken}", file=sys.stderr)
        return 2
    prepare_dagster_home(load(HomeSettings).dagster_home)
    command = [installed_command("dg"), "dev", "-w", str(WORKSPACE), "-h", host]
    command += ["-p", str(options.port)]
    env = os.environ.copy()
    return run_until_stopped("dev", lambda group: group.start(command, env).wait())
