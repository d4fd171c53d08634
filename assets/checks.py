"""Asset checks that guard the serving snapshot: keys present and unique."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.loading import open_warehouse
from warehouse_sql import read_sql


def key_check(
    asset: dg.AssetsDefinition,
    table: str,
    key_columns: Sequence[str],
    where: str = "TRUE",
    where_params: Sequence[object] = (),
) -> dg.AssetChecksDefinition:
    """A blocking check: no NULL and no duplicate ``key_columns`` in ``table`` (``where``).

    Identifiers come from this codebase; values travel as parameters.
    """
    key = ", ".join(key_columns)
    nulls = " OR ".join(f"{column} IS NULL" for column in key_columns)
    query = (
        f"SELECT count(*), count(*) FILTER ({nulls}), count(*) - count(DISTINCT ({key})) "
        f"FROM {table} WHERE {where}"
    )
    name = f"{asset.key.path[-1]}_keys_unique_and_present"

    @dg.asset_check(
        asset=asset,
        name=name,
        blocking=True,
        description=f"Every row of {table} has a non-NULL, unique ({key}).",
    )
    def _check(warehouse: DuckDBResource) -> dg.AssetCheckResult:
        with open_warehouse(warehouse) as con:
            rows, null_keys, duplicates = con.execute(query, list(where_params)).fetchall()[0]
        return dg.AssetCheckResult(
            passed=null_keys == 0 and duplicates == 0,
            metadata={"rows": rows, "null_keys": null_keys, "duplicate_keys": duplicates},
        )

    return _check


def pairing_products_resolve(pairings: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    """A warning when pairings name SKUs the catalog lacks (kept as received, listed here)."""

    @dg.asset_check(
        asset=pairings,
        name="pairing_products_resolve_to_catalog",
        additional_deps=["catalog_items"],
        description="Every SKU a pairing names is in the catalog (a warning: pairings may run "
        "ahead of the catalog; the JSON is served unchanged either way).",
    )
    def _check(warehouse: DuckDBResource) -> dg.AssetCheckResult:
        with open_warehouse(warehouse) as con:
            missing = [row[0] for row in con.execute(read_sql("pairing_skus_missing")).fetchall()]
        return dg.AssetCheckResult(
            passed=not missing,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"missing_skus": len(missing), "examples": ", ".join(missing[:20])},
        )

    return _check
