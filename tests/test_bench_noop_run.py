"""The no-op Dagster runs the benchmarks measure beside the sync: ``bench.noop_run`` as a whole
process on an instance folder on disk (started with this interpreter, not through ``uv run`` as
the bench starts it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from bench.noop_run import sync_steps
from pipelines.instance import run_instance

ROOT = Path(__file__).resolve().parent.parent


def _steps_of_the_run(dagster_home: Path) -> int:
    with run_instance(dagster_home) as instance:
        (run,) = instance.get_run_records()
        assert run.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        stats = instance.get_run_stats(run.dagster_run.run_id)
    return stats.steps_succeeded


@pytest.mark.parametrize(("flags", "expected"), [([], 1), (["--like-sync"], None)])
def test_a_no_op_run_has_one_step_or_as_many_as_the_sync_job(
    tmp_path: Path, flags: list[str], expected: int | None
) -> None:
    home = tmp_path / "dagster"
    env = {key: value for key, value in os.environ.items() if key != "DAGSTER_HOME"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.noop_run", str(home), *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    steps = _steps_of_the_run(home)
    assert steps == (expected if expected is not None else sync_steps())
    assert sync_steps() > 1
