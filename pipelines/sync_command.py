"""``ductwork sync``: run the sync job through the Dagster instance, so runs show in the UI."""

from __future__ import annotations

import dagster as dg

from ductwork.settings import HomeSettings, UpstreamSettings, load
from pipelines.instance import prepare_dagster_home


def run_sync(
    selection: list[str] | None = None, publish: bool = True, reconcile: bool = False
) -> bool:
    """Materialise the selected assets (all by default) and publish a snapshot; True on success.

    ``selection`` names assets (``pairings``) or groups (``group:catalog``); ``reconcile``
    runs full listings (deletions detected, every lead re-read).
    """
    return run_job("reconcile_all" if reconcile else "sync_all", selection, publish)


def run_job(
    job_name: str,
    selection: list[str] | None = None,
    publish: bool = True,
    run_id: str | None = None,
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
            instance=instance, asset_selection=keys, raise_on_error=False, run_id=run_id
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
