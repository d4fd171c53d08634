"""The Dagster assets of every stream, made from the registry (``ductwork.streams``).

Each step of a stream becomes one asset; steps that share a batch become one multi-asset, so
they run as one Dagster step (a step has a fixed cost, a good part of a run in which nothing
changed). The reading and writing is the step's reader's (``ductwork.sync``): an asset only
opens the warehouse, hands the reader its resources and options, and records what it reports.
"""

# No ``from __future__ import annotations`` here: the compute functions are made at run time,
# and Dagster reads their parameters' types to find the config and resources they take.

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import dagster as dg
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.ingest import INGEST_RETRY, OWNERS, WAREHOUSE_POOL, failing_clearly, materialization
from assets.interrupts import stops_on_interrupt
from assets.resources import ObjectStore, UpstreamResource, open_warehouse
from ductwork.contract.paths import Family
from ductwork.keys import SCOPE_OF
from ductwork.settings import SyncSettings, load
from ductwork.streams.registry import STREAMS, Step, Stream
from ductwork.sync.context import Mode, RunOptions, SyncContext


def group_of(family: Family) -> str:
    """The asset group of a family's streams: its scope's name (``catalog`` for products)."""
    return SCOPE_OF[family]


class ModeConfig(dg.Config):
    """Run config of a stream that can be reconciled (also settable in the UI's launchpad)."""

    mode: Literal["incremental", "reconcile"] = "incremental"


class ResumableConfig(ModeConfig):
    """Run config of a stream that keeps a resume point."""

    reset: bool = Field(default=False, description="Forget the resume point first.")


class WindowConfig(ResumableConfig):
    """Run config of a stream that reads a window of recent records again."""

    # The default comes from DUCTWORK_LEAD_WINDOW_DAYS when the code location loads.
    window_days: int = Field(
        default=load(SyncSettings).lead_window_days,
        description="Days of recent records to read again (default: DUCTWORK_LEAD_WINDOW_DAYS).",
    )


CONFIG_OF: dict[frozenset[str], type[dg.Config]] = {
    frozenset({"mode"}): ModeConfig,
    frozenset({"mode", "reset"}): ResumableConfig,
    frozenset({"mode", "reset", "window_days"}): WindowConfig,
}


def run_options(config: dg.Config | None) -> RunOptions:
    """The options a reader takes, from an asset's run config (none: the defaults)."""
    if config is None:
        return RunOptions()
    return RunOptions(
        mode=Mode(getattr(config, "mode", Mode.INCREMENTAL)),
        reset=getattr(config, "reset", False),
        window_days=getattr(config, "window_days", None),
    )


def _run_steps(
    steps: Sequence[Step],
    config: dg.Config | None,
    warehouse: DuckDBResource,
    upstream: UpstreamResource | None,
    object_store: ObjectStore | None,
    log: Any,
) -> Iterator[dg.MaterializeResult]:
    """Open the warehouse and let the steps' reader run them, recording each as it ends."""
    with open_warehouse(warehouse) as con, failing_clearly():
        context = SyncContext(con, upstream, run_options(config), object_store, log)  # type: ignore[arg-type]
        for result in steps[0].reader.sync(steps, context):
            yield materialization(result)


def _compute(steps: Sequence[Step], multi: bool) -> Callable[..., Any]:
    """The compute function of one asset, or of a batch's multi-asset: its parameters are
    the resources its steps use (by their kinds) and the config its reader takes."""
    options = steps[0].reader.options
    config_class = CONFIG_OF.get(options)
    kinds = set().union(*(step.kinds for step in steps))
    wants_upstream, wants_bucket = "api" in kinds, "s3" in kinds

    def compute(context: dg.AssetExecutionContext, **given: Any) -> Iterator[dg.MaterializeResult]:
        chosen = steps
        if multi:
            selected = context.selected_asset_keys
            chosen = [step for step in steps if dg.AssetKey(step.asset) in selected]
        yield from _run_steps(
            chosen,
            given.get("config"),
            given["warehouse"],
            given.get("upstream"),
            given.get("object_store"),
            context.log,
        )

    parameters: dict[str, Any] = {"context": dg.AssetExecutionContext}
    if config_class is not None:
        parameters["config"] = config_class
    parameters["warehouse"] = DuckDBResource
    if wants_upstream:
        parameters["upstream"] = UpstreamResource
    if wants_bucket:
        parameters["object_store"] = ObjectStore
    return _with_parameters(compute, parameters)


def _with_parameters(
    compute: Callable[..., Any], parameters: dict[str, type]
) -> Callable[..., Any]:
    """``compute`` presented to Dagster with these keyword parameters and types."""
    import inspect

    def named(context: dg.AssetExecutionContext, **given: Any) -> Iterator[dg.MaterializeResult]:
        yield from compute(context, **given)

    signature = inspect.Signature(
        [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind)
            for name, kind in parameters.items()
        ],
        return_annotation=Iterator[dg.MaterializeResult],
    )
    named.__signature__ = signature  # type: ignore[attr-defined]
    named.__annotations__ = {**parameters, "return": Iterator[dg.MaterializeResult]}
    return named


def _spec(stream: Stream, step: Step) -> dg.AssetSpec:
    return dg.AssetSpec(
        step.asset,
        group_name=group_of(stream.family),
        kinds=set(step.kinds),
        owners=OWNERS,
        description=step.description,
        deps=list(step.after),
        tags={"ductwork/stream": stream.name},
    )


def stream_assets() -> list[dg.AssetsDefinition]:
    """One asset per step of every stream (a multi-asset per batch), in registry order."""
    units: dict[str, list[tuple[Stream, Step]]] = {}
    for stream in STREAMS:
        for step in stream.steps:
            units.setdefault(step.batch or step.asset, []).append((stream, step))
    return [
        _multi(name, members) if members[0][1].batch else _single(*members[0])
        for name, members in units.items()
    ]


def _single(stream: Stream, step: Step) -> dg.AssetsDefinition:
    spec = _spec(stream, step)
    compute = stops_on_interrupt(_compute([step], multi=False))
    return dg.multi_asset(
        name=step.asset,
        specs=[spec],
        pool=WAREHOUSE_POOL,
        retry_policy=INGEST_RETRY,
    )(compute)


def _multi(name: str, members: list[tuple[Stream, Step]]) -> dg.AssetsDefinition:
    steps = [step for _, step in members]
    compute = stops_on_interrupt(_compute(steps, multi=True))
    return dg.multi_asset(
        name=name,
        specs=[_spec(stream, step) for stream, step in members],
        can_subset=True,
        pool=WAREHOUSE_POOL,
        retry_policy=INGEST_RETRY,
        description=f"The steps of {', '.join(step.asset for step in steps)}, in one step.",
    )(compute)


STREAM_ASSETS: list[dg.AssetsDefinition] = stream_assets()
# Every synced asset's key, in registry order.
SYNCED_KEYS: list[dg.AssetKey] = [dg.AssetKey(step.asset) for s in STREAMS for step in s.steps]


def asset_named(name: str) -> dg.AssetsDefinition:
    """The asset (or the batch's multi-asset) that materialises the asset ``name``."""
    for made in STREAM_ASSETS:
        if dg.AssetKey(name) in made.keys:
            return made
    raise KeyError(f"no stream step materialises {name!r}")
