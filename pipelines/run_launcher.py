"""Dagster's default run launcher, taught to tell whether a run's worker process still lives.

The default launcher starts each run in a process of the code server but cannot check on it
afterwards, so the daemon's run monitoring never notices a run whose process was killed. This
one reads the worker every ductwork run records (``assets.run_recovery``): run monitoring
then reports such a run failed, and frees its pool slots ``free_slots_after_run_end_seconds``
later, with no ductwork command needing to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
from dagster._serdes import ConfigurableClassData

from assets.run_recovery import worker_of


class LocalRunLauncher(dg.DefaultRunLauncher):
    """Launches runs as the default launcher does; reports a run's worker dead once its
    recorded process is gone from this host."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> LocalRunLauncher:
        return cls(inst_data=inst_data)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        worker = worker_of(run)
        if worker is None or not worker.on_this_host:
            # Not yet recorded (the run is still starting) or judged on its own host.
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        if worker.is_alive():
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=str(worker))
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            msg=f"the run's process (pid {worker.pid} on {worker.host}) is gone",
            run_worker_id=str(worker),
        )
