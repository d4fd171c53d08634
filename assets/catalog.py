"""Product catalog assets: the catalog list, the six typed unit lists and the pairings."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present, pairing_products_resolve
from assets.ingest import fetch, ingest_asset, run_metadata
from assets.list_reader import ListRead, read_whole_list
from assets.loading import (
    ListContent,
    Record,
    Replacement,
    RowOf,
    name_of,
    open_warehouse,
    replace_rows,
    rows_table,
    text_or_none,
    timestamp_or_none,
)
from assets.schema_drift import CATALOG_ITEM_RECORD, PAIRING_RECORD, UNIT_RECORD
from ductwork.contract import paths
from pipelines.resources import UpstreamResource

GROUP = "catalog"
KINDS = {"api", "duckdb"}
TS = pa.timestamp("us", tz="UTC")

CATALOG_ITEM_SCHEMA = pa.schema(
    [("sku", pa.string()), ("srn", pa.string()), ("unit_type", pa.string()),
     ("href", pa.string()), ("record", pa.string()), ("synced_at", TS)]
)  # fmt: skip
UNIT_SCHEMA = pa.schema(
    [("unit_type", pa.string()), ("sku", pa.string()), ("srn", pa.string()),
     ("brand", pa.string()), ("category", pa.string()), ("subcategory", pa.string()),
     ("series_name", pa.string()), ("family_name", pa.string()),
     ("description", pa.string()), ("status", pa.string()), ("updated_at", TS),
     ("record", pa.string()), ("synced_at", TS)]
)  # fmt: skip
PAIRING_SCHEMA = pa.schema(
    [("relationship_id", pa.int64()), ("rel_type", pa.string()), ("updated_at", TS),
     ("record", pa.string()), ("synced_at", TS)]
)  # fmt: skip
PAIRING_PRODUCT_SCHEMA = pa.schema(
    [("relationship_id", pa.int64()), ("position", pa.string()), ("sku", pa.string()),
     ("srn", pa.string()), ("unit_type", pa.string())]
)  # fmt: skip


def catalog_item_row(record: Record) -> dict[str, Any]:
    """Typed columns of a ProductCatalogItem."""
    links = record.get("_links") or {}
    return {
        "sku": record["sku"],
        "srn": text_or_none(record.get("srn")),
        "unit_type": text_or_none(record.get("type")),
        "href": text_or_none((links.get("self") or {}).get("href")),
    }


def unit_row_for(slug: str) -> RowOf:
    """A row builder for unit records of one typed list."""

    def unit_row(record: Record) -> dict[str, Any]:
        return {
            "unit_type": slug,
            "sku": record["sku"],
            "srn": text_or_none(record.get("srn")),
            "brand": text_or_none(record.get("brand")),
            "category": text_or_none(record.get("category")),
            "subcategory": text_or_none(record.get("subcategory")),
            "series_name": name_of(record.get("series")),
            "family_name": name_of(record.get("family")),
            "description": text_or_none(record.get("description")),
            "status": text_or_none(record.get("status")),
            "updated_at": timestamp_or_none(record.get("updatedAt")),
        }

    return unit_row


def pairing_row(record: Record) -> dict[str, Any]:
    """Typed columns of a Pairing."""
    return {
        "relationship_id": int(record["relationshipId"]),
        "rel_type": text_or_none(record.get("relType")),
        "updated_at": timestamp_or_none(record.get("updatedAt")),
    }


def pairing_product_rows(pairings: list[Record]) -> pa.Table:
    """One row per product slot of every pairing."""
    rows = [
        {
            "relationship_id": int(pairing["relationshipId"]),
            "position": product.get("position"),
            "sku": text_or_none(product.get("sku")),
            "srn": text_or_none(product.get("srn")),
            "unit_type": text_or_none(product.get("type")),
        }
        for pairing in pairings
        for product in pairing.get("products") or []
    ]
    return pa.Table.from_pylist(rows, schema=PAIRING_PRODUCT_SCHEMA)


def _by_sku(record: Record) -> str:
    return record["sku"]


def _read_metadata(read: ListRead) -> dict[str, int]:
    return {"pages": read.pages, "reported_total": read.reported_total, "reads": read.attempts}


@ingest_asset(
    group=GROUP,
    description="Every product of /products/v2.0/products (SKU, SRN, type, link), by SKU.",
)
def catalog_items(upstream: UpstreamResource, warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Mirror the product list into ``catalog_items``."""
    fetched = fetch(upstream, lambda c: read_whole_list(c, paths.PRODUCTS_LIST, _by_sku))
    records = fetched.value.records
    content = ListContent.of("catalog_items", records)
    with open_warehouse(warehouse) as con:
        unchanged = content.already_stored(con, "catalog_items")
        if not unchanged:
            table = rows_table(records, catalog_item_row, CATALOG_ITEM_SCHEMA)
            replace_rows(con, Replacement("catalog_items", table), content=content)
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            len(records),
            unchanged=unchanged,
            **_read_metadata(fetched.value),
            **CATALOG_ITEM_RECORD.drift(records),
        )
    )


def unit_list_asset(slug: str) -> dg.AssetsDefinition:
    """The asset mirroring one typed unit list (e.g. indoor-units) into ``units``."""
    row_of = unit_row_for(slug)
    name = slug.replace("-", "_")

    @ingest_asset(
        name=name,
        group=GROUP,
        description=f"Full unit records of /products/v2.0/{slug}, in table `units`.",
    )
    def _unit_list(upstream: UpstreamResource, warehouse: DuckDBResource) -> dg.MaterializeResult:
        path = paths.unit_path(slug)
        fetched = fetch(upstream, lambda c: read_whole_list(c, path, _by_sku))
        records = fetched.value.records
        content = ListContent.of(name, records)
        with open_warehouse(warehouse) as con:
            unchanged = content.already_stored(con, "units", "unit_type = ?", [slug])
            if not unchanged:
                table = rows_table(records, row_of, UNIT_SCHEMA)
                replace_rows(
                    con, Replacement("units", table, "unit_type = ?", [slug]), content=content
                )
        drift = UNIT_RECORD.drift(records)
        return dg.MaterializeResult(
            metadata=run_metadata(
                fetched,
                len(records),
                unchanged=unchanged,
                **_read_metadata(fetched.value),
                **drift,
            )
        )

    return _unit_list


UNIT_ASSETS: list[dg.AssetsDefinition] = [unit_list_asset(slug) for slug in paths.UNIT_SLUGS]


@ingest_asset(
    group=GROUP,
    description="Pairings and relationships (up to 3 products each) from /products/v2.0/pairings.",
)
def pairings(upstream: UpstreamResource, warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Mirror the pairings into ``pairings`` and ``pairing_products`` together."""

    def by_id(record: Record) -> int:
        return int(record["relationshipId"])

    fetched = fetch(upstream, lambda c: read_whole_list(c, paths.PAIRINGS_LIST, by_id))
    records = fetched.value.records
    content = ListContent.of("pairings", records)
    with open_warehouse(warehouse) as con:
        unchanged = content.already_stored(con, "pairings")
        if not unchanged:
            table = rows_table(records, pairing_row, PAIRING_SCHEMA)
            products = pairing_product_rows(records)
            replace_rows(
                con,
                Replacement("pairings", table),
                Replacement("pairing_products", products),
                content=content,
            )
        slots = con.execute("SELECT count(*) FROM pairing_products").fetchall()[0][0]
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            len(records),
            unchanged=unchanged,
            product_slots=slots,
            **_read_metadata(fetched.value),
            **PAIRING_RECORD.drift(records),
        )
    )


CATALOG_ASSETS: list[dg.AssetsDefinition] = [catalog_items, *UNIT_ASSETS, pairings]


CATALOG_CHECKS: list[AssetRule] = [
    keys_unique_and_present(catalog_items, "catalog_items", ["sku"]),
    *(
        keys_unique_and_present(asset, "units", ["sku"], "unit_type = ?", [slug])
        for asset, slug in zip(UNIT_ASSETS, paths.UNIT_SLUGS, strict=True)
    ),
    keys_unique_and_present(pairings, "pairings", ["relationship_id"]),
    pairing_products_resolve(pairings),
]
