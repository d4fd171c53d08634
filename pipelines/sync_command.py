"""``ductwork sync``: run the sync job through the Dagster instance, so runs show in the UI."""

from __future__ import annotations

import dagster as dg

from ductwork.settings import HomeSettings, UpstreamSettings, load
from pipelines.instance import prepare_dagster_home

# Run config of the incremental streams: a full refresh re-reads everything from scratch;
# a reset forgets the bookmark (or cursor), so the incremental walk starts from the beginning.
FULL_REFRESH = {
    "warehouse_digital_assets": {"mode": "reconcile", "reset_bookmark": True},
    "warehouse_submittals": {"mode": "reconcile"},
    "crm_leads": {"mode": "reconcile", "reset_cursor": True},
}
RESET = {
    "warehouse_digital_assets": {"reset_bookmark": True},
    "crm_leads": {"reset_cursor": True},
}


class ControlError(ValueError):
    """A stream named on the command line cannot take the requested control."""


def stream_controls(
    full_refresh: list[str] | None, reset: list[str] | None
) -> tuple[list[str], dict]:
    """The streams to select and the run config for ``--full-refresh`` and ``--reset-bookmark``.

    Streams that always read their whole list (the catalog, internal operations) need no
    config: a full refresh of them is a run of the asset.
    """
    from assets.serving import SYNCED_KEYS

    known = {key.to_user_string() for key in SYNCED_KEYS}
    ops: dict[str, dict] = {}
    for stream in full_refresh or []:
        if stream not in known:
            raise ControlError(f"unknown stream {stream!r}; streams: {', '.join(sorted(known))}")
        if stream in FULL_REFRESH:
            ops.setdefault(stream, {"config": {}})["config"].update(FULL_REFRESH[stream])
    for stream in reset or []:
        if stream not in RESET:
            raise ControlError(
                f"stream {stream!r} keeps no bookmark; streams with one: {', '.join(sorted(RESET))}"
            )
        ops.setdefault(stream, {"config": {}})["config"].update(RESET[stream])
    streams = [*(full_refresh or []), *(reset or [])]
    return list(dict.fromkeys(streams)), ({"ops": ops} if ops else {})


def run_sync(
    selection: list[str] | None = None,
    publish: bool = True,
    reconcile: bool = False,
    full_refresh: list[str] | None = None,
    reset: list[str] | None = None,
) -> bool:
    """Materialise the selected assets (all by default) and publish a snapshot; True on success.

    ``selection`` names assets (``pairings``) or groups (``group:catalog``); ``reconcile``
    runs full listings (deletions detected, every lead re-read). Streams named in
    ``full_refresh`` or ``reset`` are added to the selection and run with that control.
    """
    if not (full_refresh or reset):
        return run_job("reconcile_all" if reconcile else "sync_all", selection, publish)
    streams, run_config = stream_controls(full_refresh, reset)
    if reconcile:
        raise ControlError("--reconcile already re-reads every stream; drop the stream controls")
    return run_job("sync_all", [*(selection or []), *streams], publish, run_config=run_config)


def run_job(
    job_name: str,
    selection: list[str] | None = None,
    publish: bool = True,
    run_id: str | None = None,
    run_config: dict | None = None,
) -> bool:
    """Execute a job of the code location on the instance under DUCTWORK_HOME."""
    load(UpstreamSettings)  # fail early, in one line, when the upstream is not configured
    home = load(HomeSettings)
    prepare_dagster_home(home.dagster_home)
    from pipelines.definitions import defs  # after DAGSTER_HOME is set

    job = defs.resolve_job_def(job_name)
    keys = _selected_keys(defs, selection, publish)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            asset_selection=keys,
            raise_on_error=False,
            run_id=run_id,
            run_config=run_config,
        )
    return result.success


def _selected_keys(
    defs: dg.Definitions, selection: list[str] | None, publish: bool
) -> list[dg.AssetKey] | None:
    if not selection:
        return None
    graph = defs.resolve_asset_graph()
    chosen = dg.AssetSelection.assets()
    for name in selection:
        if name.startswith("group:"):
            chosen = chosen | dg.AssetSelection.groups(name.removeprefix("group:"))
        else:
            chosen = chosen | dg.AssetSelection.assets(name)
    if publish:
        chosen = chosen | dg.AssetSelection.assets("serving_snapshot")
    keys = sorted(chosen.resolve(graph), key=lambda key: key.to_user_string())
    return list(keys)
