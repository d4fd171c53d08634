"""Asset checks that guard the serving snapshot: keys present and unique, and no table that the
published snapshot has rows in suddenly empty."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.loading import open_warehouse
from ductwork import snapshots
from pipelines.resources import DataHome
from warehouse_sql import read_sql


def key_check(
    asset: dg.AssetsDefinition,
    table: str,
    key_columns: Sequence[str],
    where: str = "TRUE",
    where_params: Sequence[object] = (),
) -> dg.AssetChecksDefinition:
    """A blocking check: no NULL and no duplicate ``key_columns`` in ``table`` (``where``),
    and not empty when the current published snapshot has rows there (a sync that emptied a
    table is far likelier a fault than a real change, and must not reach the read API).

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
        description=f"Every row of {table} has a non-NULL, unique ({key}); not emptied since "
        "the last publish.",
    )
    def _check(warehouse: DuckDBResource, data_home: DataHome) -> dg.AssetCheckResult:
        with open_warehouse(warehouse) as con:
            rows, null_keys, duplicates = con.execute(query, list(where_params)).fetchall()[0]
        published = _published_rows(data_home, query, where_params)
        emptied = rows == 0 and bool(published)
        return dg.AssetCheckResult(
            passed=null_keys == 0 and duplicates == 0 and not emptied,
            metadata={
                "rows": rows,
                "null_keys": null_keys,
                "duplicate_keys": duplicates,
                "rows_in_published_snapshot": published if published is not None else -1,
            },
        )

    return _check


def _published_rows(data_home: DataHome, query: str, where_params: Sequence[object]) -> int | None:
    """Rows the same count query finds in the current snapshot; None before the first publish
    (or when that snapshot predates the table)."""
    try:
        _, con = snapshots.open_current(data_home.snapshots_dir)
    except FileNotFoundError:
        return None
    with con:
        try:
            return con.execute(query, list(where_params)).fetchall()[0][0]
        except duckdb.CatalogException:
            return None


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
