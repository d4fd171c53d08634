"""The ``forget`` job: ``ductwork forget`` as a Dagster run on the data folder's instance, so
operators see each erasure in the UI with its reason and what it removed.

The keys never enter the run's config, tags or events: the run reads them from the pending
erasure request the command wrote in the data folder (0600), and removes it once done. Its
metadata names each key by its keyed hash (``ductwork.erasure.audit``). After the publish the
stream's subscribers are notified as after a sync's.
"""

# No ``from __future__ import annotations``: Dagster reads the ``context`` annotation as an object.
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.ingest import WAREHOUSE_POOL
from assets.notifications import notify_publish
from assets.publish import publish_to_store
from assets.resources import DataHome, open_warehouse
from ductwork.erasure.forget import carry_out, read_pending
from ductwork.settings import HomeSettings

FORGET_JOB = "forget"


@dg.op(
    description=(
        "Erase the records of the pending `ductwork forget` request from the warehouse, its "
        "history and the changes feed, publish a snapshot without them, remove the older "
        "copies that held them and log the erasure (keyed hashes, never the keys)."
    ),
    pool=WAREHOUSE_POOL,
)
def erase_personal_data(
    context: dg.OpExecutionContext, warehouse: DuckDBResource, data_home: DataHome
) -> dg.Output[None]:
    """Carry out the pending erasure request of the data folder."""
    home = HomeSettings(home=Path(data_home.path))
    request = read_pending(home.home)
    if request is None:
        raise dg.Failure("no pending erasure request in the data folder: nothing to erase")
    with open_warehouse(warehouse, parallel=True) as con:
        outcome = carry_out(con, home, request, store=lambda snapshot: publish_to_store(snapshot))
    # Subscribers are told of the publish as after any other (a pointer into the feed, which
    # now has the deletes).
    told = notify_publish(home)
    context.log.info(
        f"erasure {outcome.erasure_id}: {len(outcome.key_hashes)} {request.stream} record(s) "
        f"erased, snapshot {outcome.version} published"
    )
    metadata: dict[str, object] = {
        "erasure": outcome.erasure_id,
        "stream": request.stream,
        "reason": request.reason,
        "suppressed": request.suppress,
        "key_hashes": dg.MetadataValue.json(outcome.key_hashes),
        "rows_removed": dg.MetadataValue.json(outcome.removed),
        "copies_removed": dg.MetadataValue.json(outcome.copies),
        "snapshot_version": outcome.version,
        "notifications_delivered": sum(told_one.delivered for told_one in told.outcomes),
    }
    return dg.Output(None, metadata=metadata)


@dg.job(
    name=FORGET_JOB,
    description=(
        "ductwork forget: erase a person's records (the keys read from the data folder's "
        "pending request, never from the run's config), then publish without them."
    ),
    executor_def=dg.in_process_executor,
)
def forget_job() -> None:
    erase_personal_data()
