"""``ductwork sync``: run the sync job through the Dagster instance, so runs show in the UI."""

from __future__ import annotations

import atexit
import gc
import time
import uuid
from dataclasses import dataclass

import dagster as dg

from assets.notifications import PUBLISH_ASSETS
from assets.run_recovery import worker_tags
from ductwork.settings import HomeSettings, UpstreamSettings, load
from ductwork.stop_signals import WatchStopSignals
from ductwork.streams.registry import STREAMS, Step, Stream, stream_named, stream_of_asset
from pipelines.instance import prepare_dagster_home, run_instance
from pipelines.run_progress import logger_config, summarise
from pipelines.usage import UsageError


class ControlError(UsageError):
    """A stream, asset, group or job named on the command line cannot be used as asked."""


def stream_for(name: str) -> Stream:
    """The stream a command-line name means: a stream's name, or one of its assets'."""
    found = stream_of_asset(name)
    if found is not None:
        return found
    try:
        return stream_named(name)
    except KeyError:
        names = ", ".join(stream.name for stream in STREAMS)
        raise ControlError(f"unknown stream {name!r}; streams: {names}") from None


def _op_of(step: Step) -> str:
    return step.batch or step.asset


def stream_controls(
    full_refresh: list[str] | None, reset: list[str] | None
) -> tuple[list[str], dict]:
    """The assets to select and the run config for ``--full-refresh`` and ``--reset``.

    A full refresh reconciles every step that can (and forgets its resume point); a stream
    read whole on every run needs no config: a full refresh of it is a run of its steps. A
    reset forgets the resume point of a stream that keeps one.
    """
    ops: dict[str, dict] = {}
    selected: list[str] = []
    for name in full_refresh or []:
        stream = stream_for(name)
        selected += stream.assets
        for step in stream.steps:
            wanted = {"mode": "reconcile", "reset": True}
            config = {k: v for k, v in wanted.items() if k in step.reader.options}
            if config:
                ops.setdefault(_op_of(step), {"config": {}})["config"].update(config)
    for name in reset or []:
        stream = stream_for(name)
        if not stream.resumable:
            resumable = ", ".join(s.name for s in STREAMS if s.resumable)
            raise ControlError(
                f"stream {stream.name!r} keeps no resume point; streams with one: {resumable}"
            )
        selected += stream.assets
        for step in stream.steps:
            if step.reader.resumable:
                ops.setdefault(_op_of(step), {"config": {}})["config"]["reset"] = True
    return list(dict.fromkeys(selected)), ({"ops": ops} if ops else {})


@dataclass(frozen=True)
class RunOutcome:
    """How a CLI run ended."""

    run_id: str
    status: dg.DagsterRunStatus
    signal_exit_code: int | None  # 128 + the stop signal that ended it, if one did

    @property
    def exit_code(self) -> int:
        """0 on success, 128 + the signal's number when a signal stopped it, else 1."""
        if self.signal_exit_code is not None:
            return self.signal_exit_code
        return 0 if self.status == dg.DagsterRunStatus.SUCCESS else 1


def run_sync(
    selection: list[str] | None = None,
    publish: bool = True,
    reconcile: bool = False,
    full_refresh: list[str] | None = None,
    reset: list[str] | None = None,
    verbose: bool = False,
) -> RunOutcome:
    """Materialise the selected assets (all by default) and publish a snapshot.

    ``selection`` names assets or groups (``group:NAME``); ``reconcile``
    runs full listings (deletions detected, every lead re-read). Streams named in
    ``full_refresh`` or ``reset`` (by stream or asset name) are added to the selection and
    run with that control.
    """
    if not (full_refresh or reset):
        job = "reconcile_all" if reconcile else "sync_all"
        return run_job(job, selection, publish, verbose=verbose)
    streams, run_config = stream_controls(full_refresh, reset)
    if reconcile:
        raise ControlError("--reconcile already re-reads every stream; drop the stream controls")
    selected = [*(selection or []), *streams]
    return run_job("sync_all", selected, publish, run_config=run_config, verbose=verbose)


def run_job(
    job_name: str,
    selection: list[str] | None = None,
    publish: bool = True,
    run_id: str | None = None,
    run_config: dict | None = None,
    verbose: bool = False,
) -> RunOutcome:
    """Execute a job of the code location on the instance under DUCTWORK_HOME, in this
    process, printing a line per finished step and a summary.

    The run waits its turn at the warehouse like any other (see
    ``assets.warehouse_admission``). SIGINT, SIGTERM and SIGHUP end it as canceled.
    """
    load(UpstreamSettings)  # fail early, in one line, when the upstream is not configured
    home = load(HomeSettings)
    prepare_dagster_home(home.dagster_home)
    from pipelines.definitions import defs  # after DAGSTER_HOME is set

    names = sorted(job.name for job in defs.resolve_all_job_defs())
    if job_name not in names:
        raise ControlError(f"unknown job {job_name!r}; jobs: {', '.join(names)}")
    job = defs.resolve_job_def(job_name)
    keys = _selected_keys(defs, selection, publish)
    run_id = run_id or str(uuid.uuid4())
    config = {**(run_config or {}), **logger_config(verbose)}
    instance = run_instance(home.dagster_home)
    freeze_what_is_loaded()
    started = time.monotonic()
    with instance:
        with WatchStopSignals() as stop:
            events: list[dg.DagsterEvent] = []
            try:
                result = job.execute_in_process(
                    instance=instance,
                    asset_selection=keys,
                    raise_on_error=False,
                    run_id=run_id,
                    run_config=config,
                    tags=worker_tags(),
                )
                events = list(result.all_events)
            except KeyboardInterrupt:
                pass  # a stop signal before the run began executing, or after it ended
            status = _settle(instance, run_id)
        outcome = RunOutcome(run_id, status, stop.exit_code)
    for line in summarise(run_id, status.value, events, time.monotonic() - started).lines():
        print(line, flush=True)
    return outcome


def freeze_what_is_loaded() -> None:
    """Keep what is loaded so far (Dagster, the libraries, the definitions, the instance's
    storage) out of the garbage collector's full passes for the rest of this process, and turn
    collections on (``ductwork sync`` starts with them off, see ``pipelines.cli``).

    Those objects live as long as the process, and parsing the upstream's pages sets off full
    passes again and again, each re-scanning them. Unfrozen at exit, so that DuckDB's objects
    are still freed before the interpreter goes away.
    """
    gc.freeze()
    atexit.register(gc.unfreeze)
    gc.enable()


def _settle(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    """The run's final status, ending it as canceled if an interrupt left it open, with every
    pool slot it claimed freed."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return dg.DagsterRunStatus.CANCELED  # stopped before the run was created
    if not run.is_finished:
        instance.report_run_canceled(run, message="stopped by a signal")
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)
    settled = instance.get_run_by_id(run_id)
    return settled.status if settled is not None else run.status


def _selected_keys(
    defs: dg.Definitions, selection: list[str] | None, publish: bool
) -> list[dg.AssetKey] | None:
    if not selection:
        return None
    graph = defs.resolve_asset_graph()
    known_keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    known_groups = {graph.get(key).group_name for key in graph.get_all_asset_keys()}
    chosen = dg.AssetSelection.assets()
    for name in selection:
        if name.startswith("group:"):
            group = name.removeprefix("group:")
            if group not in known_groups:
                raise ControlError(
                    f"unknown group {group!r}; groups: {', '.join(sorted(known_groups))}"
                )
            chosen = chosen | dg.AssetSelection.groups(group)
        elif name in known_keys:
            chosen = chosen | dg.AssetSelection.assets(name)
        else:
            raise ControlError(
                f"unknown asset {name!r}; assets: {', '.join(sorted(known_keys))} (or group:NAME)"
            )
    if publish:
        chosen = chosen | dg.AssetSelection.assets(*PUBLISH_ASSETS)
    keys = sorted(chosen.resolve(graph), key=lambda key: key.to_user_string())
    return list(keys)
