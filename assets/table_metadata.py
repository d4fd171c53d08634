"""Dagster's catalog as the data dictionary: each asset names its table and its columns.

The descriptions come from the same ``COMMENT ON`` statements that every published snapshot
gets (``ductwork.warehouse.table_docs``), so the UI and ``ductwork docs`` never disagree.
"""

from __future__ import annotations

import dagster as dg

from ductwork.streams.registry import all_steps
from ductwork.warehouse.table_docs import table_docs

# The warehouse table each asset writes (the six unit lists share one, told apart by
# ``unit_type``); the publish's is the table that names each snapshot.
ASSET_TABLES: dict[str, str] = {
    **{step.asset: step.table.name for step in all_steps()},
    "product_images": "product_images",
    "serving_snapshot": "snapshot_info",
}


def table_metadata(asset: dg.AssetKey) -> dict[str, object]:
    """``dagster/table_name`` and ``dagster/column_schema`` of the asset's table (none for an
    asset that writes no table, such as the change notifications)."""
    table = ASSET_TABLES.get(asset.to_user_string())
    if table is None:
        return {}
    doc = table_docs()[table]
    columns = [
        dg.TableColumn(column.name, column.type or "unknown", description=column.comment)
        for column in doc.columns
    ]
    return {
        "dagster/table_name": f"warehouse.main.{table}",
        "dagster/column_schema": dg.TableSchema(columns=columns),
    }


def with_table_metadata(spec: dg.AssetSpec) -> dg.AssetSpec:
    """The spec with its table's name and columns added to its definition metadata."""
    return spec.replace_attributes(metadata={**spec.metadata, **table_metadata(spec.key)})
