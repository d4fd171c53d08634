"""Runs whose process died are found, ended and stripped of what they held.

A run killed without warning (SIGKILL, the OOM killer, a lost host) never records its end: the
instance keeps it "started" and keeps the warehouse pool's slots its steps claimed, and every
later run would wait for them forever. Each run records its worker process as a tag; a process
on the same host that finds that worker gone reports the run failed through the instance and
frees its slots, as Dagster's own run monitoring does for the launchers that can check their
workers. The lease on the warehouse itself needs no recovery: the kernel drops it with the dead
process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import dagster as dg

from ductwork.run_worker import RunWorker

WORKER_TAG = "ductwork/worker"
IN_PROGRESS = [
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def worker_tags() -> dict[str, str]:
    """The tag naming this process as a run's worker."""
    return {WORKER_TAG: str(RunWorker.current())}


def record_worker(instance: dg.DagsterInstance, run_id: str) -> None:
    """Tag the run with this process, unless it already is (the CLI tags its runs up front)."""
    run = instance.get_run_by_id(run_id)
    tags = worker_tags()
    if run is not None and run.tags.get(WORKER_TAG) != tags[WORKER_TAG]:
        instance.add_run_tags(run_id, tags)


def worker_of(run: dg.DagsterRun) -> RunWorker | None:
    """The process recorded as the run's worker, if any."""
    return RunWorker.parse(run.tags.get(WORKER_TAG))


def worker_is_gone(run: dg.DagsterRun) -> bool:
    """Whether the run's recorded worker is known, on this host, and no longer running."""
    worker = worker_of(run)
    return worker is not None and worker.on_this_host and not worker.is_alive()


def end_dead_run(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """Report a run whose worker died as ended (canceled if it was being canceled, else
    failed) and free every pool slot it held or waited for."""
    worker = worker_of(run)
    who = f"pid {worker.pid} on {worker.host}" if worker else "its worker"
    message = f"The run's process ({who}) is gone: it was killed or its host was lost."
    if run.status == dg.DagsterRunStatus.CANCELING:
        instance.report_run_canceled(run, message=message)
    else:
        instance.report_run_failed(run, message=message)
    instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)


def recover_dead_runs(
    instance: dg.DagsterInstance, log: logging.Logger | dg.DagsterLogManager, *, skip: str = ""
) -> list[str]:
    """End every in-progress run whose worker died, and free the slots of runs that ended
    while holding some; returns the ids of the runs ended. ``skip`` is the caller's own run."""
    ended = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_PROGRESS)):
        run = record.dagster_run
        if run.run_id != skip and worker_is_gone(run):
            end_dead_run(instance, run)
            log.warning(f"run {run.run_id} had died (its process is gone); marked it ended")
            ended.append(run.run_id)
    _free_slots_of_ended_runs(instance, instance.event_log_storage.get_concurrency_run_ids())
    return ended


def free_orphaned_slots(instance: dg.DagsterInstance, holders: Iterable[str], skip: str) -> None:
    """Called by the holder of the warehouse lease: no live run claims pool slots without it,
    so slots claimed by another run are leftovers of a run that died before it recorded its
    worker (or under an older ductwork). Ends such a run and frees its slots."""
    for run_id in holders:
        run = instance.get_run_by_id(run_id)
        if run_id == skip or run is None:
            continue
        if run.is_finished:
            instance.event_log_storage.free_concurrency_slots_for_run(run_id)
        elif worker_of(run) is None:
            end_dead_run(instance, run)


def _free_slots_of_ended_runs(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> None:
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            instance.event_log_storage.free_concurrency_slots_for_run(run_id)
