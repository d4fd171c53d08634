"""The embedded Dagster instance under DUCTWORK_HOME, shared by the CLI, the UI and the demo."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ductwork import file_modes

if TYPE_CHECKING:
    import dagster as dg

# One run at a time and one warehouse writer at a time: DuckDB allows a single writer. The
# daemon's run monitoring ends runs whose process died (the launcher can tell, see
# pipelines/run_launcher.py) and frees the pool slots of ended runs; a ductwork run does the
# same as it starts, so a dead run is recovered whether or not the daemon runs.
INSTANCE_YAML = """\
# Written by ductwork; edit freely, ductwork keeps an existing file.
telemetry:
  enabled: false
# The upstream client's retries and 429 waits go to the run's event log (at DEBUG).
python_logs:
  managed_python_loggers: [ductwork.upstream]
  python_log_level: DEBUG
run_launcher:
  module: pipelines.run_launcher
  class: LocalRunLauncher
run_monitoring:
  enabled: true
  poll_interval_seconds: 30
  start_timeout_seconds: 300
  cancel_timeout_seconds: 120
  max_resume_run_attempts: 0
  free_slots_after_run_end_seconds: 30
concurrency:
  pools:
    default_limit: 1
  runs:
    max_concurrent_runs: 1
"""


def prepare_dagster_home(dagster_home: Path) -> Path:
    """Create the instance folder with its dagster.yaml (an existing one is kept as it is) and
    select it."""
    modes = file_modes.current()
    modes.make_private_dir(dagster_home)
    config = dagster_home / "dagster.yaml"
    if not config.exists():
        modes.write_private(config, INSTANCE_YAML.encode("utf-8"))
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


# dagster.yaml keys that choose the instance's storage; with none of them set, the storage is
# Dagster's SQLite under DAGSTER_HOME.
STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage", "instance_class")


def run_instance(dagster_home: Path) -> dg.DagsterInstance:
    """The instance under ``dagster_home`` for a process that executes a run.

    On Dagster's default SQLite storage, the event log keeps its databases open for the
    length of the process (``pipelines.event_log``): same files, same rows, far less time per
    event. Any storage that ``dagster.yaml`` names (Postgres, say) is used as configured.
    """
    import dagster as dg
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.instance.ref import InstanceRef

    base_dir = str(dagster_home)
    config, _ = dagster_instance_config(base_dir)
    if any(config.get(key) for key in STORAGE_KEYS):
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(base_dir))
    held = {
        "module": "pipelines.event_log",
        "class": "HeldSqliteEventLogStorage",
        "config": {"base_dir": str(dagster_home / "history" / "runs")},
    }
    ref = InstanceRef.from_dir(base_dir, overrides={"event_log_storage": held})
    return dg.DagsterInstance.from_ref(ref)
