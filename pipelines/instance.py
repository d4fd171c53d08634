"""The embedded Dagster instance under DUCTWORK_HOME, shared by the CLI, the UI and the demo."""

from __future__ import annotations

import os
from pathlib import Path

# One run at a time and one warehouse writer at a time: DuckDB allows a single writer.
INSTANCE_YAML = """\
telemetry:
  enabled: false
concurrency:
  pools:
    default_limit: 1
  runs:
    max_concurrent_runs: 1
"""


def prepare_dagster_home(dagster_home: Path) -> Path:
    """Create the instance folder with its dagster.yaml (kept if present) and select it."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    config = dagster_home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_YAML, encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home
