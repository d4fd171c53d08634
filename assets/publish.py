"""Publishing: the serving snapshot, the last step of every sync."""

# No ``from __future__ import annotations``: Dagster reads the ``context`` annotation as an object.
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.ingest import OWNERS, WAREHOUSE_POOL
from assets.resources import DataHome, open_warehouse
from assets.streams import SYNCED_KEYS
from ductwork import snapshots
from ductwork.erasure.forget import unfinished_erasure
from ductwork.settings import HistorySettings, S3Settings, SnapshotStoreSettings, load
from ductwork.snapshots import sync_times
from ductwork.streams.registry import STREAMS

if TYPE_CHECKING:
    from ductwork.snapshots.store import StorePublication


@dg.asset(
    group_name="serving",
    kinds={"duckdb"},
    owners=OWNERS,
    pool=WAREHOUSE_POOL,
    deps=SYNCED_KEYS,
    description=(
        "An immutable copy of the warehouse that the read API and analysts open read-only; "
        "published atomically, so readers never see a half-finished sync. A run that changed "
        "nothing copies nothing: the current snapshot is confirmed instead. With "
        "DUCTWORK_SNAPSHOT_STORE set, the snapshot is then uploaded there (file first, pointer "
        "last) for the read API's replicas."
    ),
)
def serving_snapshot(
    context: dg.AssetExecutionContext, warehouse: DuckDBResource, data_home: DataHome
) -> dg.MaterializeResult:
    """Publish the warehouse as a new snapshot and make it current (or confirm the current one
    when the warehouse's content has not changed since it was published), with when each
    stream last synced."""
    with open_warehouse(warehouse, parallel=True) as con:
        history = load(HistorySettings)
        # A `ductwork forget` stopped midway: published erased, never half so.
        erase = unfinished_erasure(con, Path(data_home.path))
        published = snapshots.publish(
            con, data_home.snapshots_dir, history.keep(), history.stream_keeps(), erase=erase
        )
    removed = snapshots.prune(data_home.snapshots_dir)
    snapshot = published.snapshot
    synced = stream_sync_times(context.instance)
    sync_times.write(data_home.snapshots_dir, synced)
    stored = publish_to_store(snapshot, sync_times.encode(synced))
    metadata: dict[str, object] = {
        "version": snapshot.version,
        "path": dg.MetadataValue.path(str(snapshot.path)),
        "size_bytes": snapshot.path.stat().st_size,
        "new_copy": published.copied,
        # False when the warehouse file was untouched since the last publish stamped it.
        "fingerprinted": published.fingerprinted,
        "pruned": len(removed),
        "streams_dated": len(synced),
        "erasure_pending": erase is not None,
    }
    if stored is not None:
        metadata["store_key"] = stored.key
        # False when the store already held the file: only its pointer was rewritten.
        metadata["store_uploaded"] = stored.uploaded
        metadata["store_pruned"] = len(stored.pruned)
    return dg.MaterializeResult(metadata=metadata)


def stream_sync_times(instance: dg.DagsterInstance) -> dict[str, datetime]:
    """When each stream last synced successfully, as the instance's run history says: the
    oldest of its steps' latest materializations (a stream with a step never materialized
    is left out)."""
    keys = [dg.AssetKey(name) for stream in STREAMS for name in stream.assets]
    # One query for every step's latest materialization, not one per step.
    events = instance.event_log_storage.get_latest_materialization_events(keys)
    found = {}
    for stream in STREAMS:
        latest = [events.get(dg.AssetKey(name)) for name in stream.assets]
        if all(event is not None for event in latest):
            oldest = min(event.timestamp for event in latest if event is not None)
            found[stream.name] = datetime.fromtimestamp(oldest, UTC)
    return found


def publish_to_store(
    snapshot: snapshots.Snapshot, synced: bytes | None = None
) -> "StorePublication | None":
    """Upload the snapshot (unless already there), the streams' sync times (None: as they
    are), and point the store at it, when ``DUCTWORK_SNAPSHOT_STORE`` is set; None otherwise."""
    url = load(SnapshotStoreSettings).snapshot_store
    if url is None:
        return None
    # Imported only here: it imports boto3, which a data folder without a store never needs.
    from ductwork.snapshots.store import SnapshotStore

    return SnapshotStore.connect(url, load(S3Settings)).publish(snapshot, synced)
