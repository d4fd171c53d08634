"""A run's turn at the warehouse: recover dead runs, wait for the lease, then hold it.

Every run that writes the warehouse passes through here as its resources come up, before any
step claims a pool slot, however it was started: so two runs never hold the warehouse at once,
and a run that finds it busy waits its turn instead of failing on DuckDB's lock.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import dagster as dg

from assets.run_recovery import free_orphaned_slots, record_worker, recover_dead_runs
from ductwork.settings import RunSettings, load
from ductwork.stop_signals import stop_signal_received
from ductwork.warehouse.lease import Holder, WarehouseLease, lease_beside

STATUS_CHECK_S = 2.0  # how often a waiting run asks the instance whether it was canceled
HOLDING_MESSAGE = "holding the warehouse lease"  # in every run's event log, when it took the lease
STOPPING = {dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED}


def hold_warehouse(
    instance: dg.DagsterInstance, run_id: str, database: Path, log: dg.DagsterLogManager
) -> WarehouseLease:
    """Take the warehouse's lease for ``run_id``, waiting for the run that holds it.

    Waiting logs the holder about every ten seconds, stops when the run is canceled, and gives
    up after DUCTWORK_WAREHOUSE_WAIT_S with an error naming the holder.
    """
    record_worker(instance, run_id)
    recover_dead_runs(instance, log, skip=run_id)
    lease = lease_beside(database)

    def report(holder: Holder | None, waited_s: float) -> None:
        held_by = holder.describe() if holder else "another run"
        log.info(f"waiting for the warehouse ({waited_s:.0f} s so far): held by {held_by}")

    last_check = [0.0]

    def canceled() -> bool:
        if note_stop_signal(instance, run_id):
            return True
        now = time.monotonic()
        if now - last_check[0] < STATUS_CHECK_S:
            return False
        last_check[0] = now
        run = instance.get_run_by_id(run_id)
        return run is not None and run.status in STOPPING

    try:
        waited = lease.acquire(run_id, load(RunSettings).warehouse_wait_s, report, canceled)
    except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError):
        # Dagster's handler raised the signal straight out of the wait: mark the run canceling
        # before the interruption reaches the run's end.
        note_stop_signal(instance, run_id)
        raise
    if waited >= 1.0:
        log.info(f"the warehouse is this run's after waiting {waited:.0f} s")
    log.debug(HOLDING_MESSAGE)
    # Holding the lease, this run is the only live one that may claim the pool's slots.
    free_orphaned_slots(instance, instance.event_log_storage.get_concurrency_run_ids(), run_id)
    return lease


def note_stop_signal(instance: dg.DagsterInstance, run_id: str) -> bool:
    """If this process received a stop signal, mark the run canceling (once) so that the
    interruption ends it as canceled rather than failed; True when a signal was received."""
    signum = stop_signal_received()
    if signum is None:
        return False
    run = instance.get_run_by_id(run_id)
    if run is not None and run.status not in STOPPING and not run.is_finished:
        name = signal.Signals(signum).name
        instance.report_run_canceling(run, message=f"ductwork received {name}: stopping the run")
    return True
