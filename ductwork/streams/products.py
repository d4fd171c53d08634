"""The product family's streams: ``products`` (the catalog list and the six typed unit lists)
and ``pairings``. Every list is read whole on every run, all in one step (``catalog``)."""

from __future__ import annotations

from typing import Any

from ductwork.contract import paths
from ductwork.contract.paths import Family
from ductwork.streams.model import HOURLY, Serving, Step, Stream, Table, Warning
from ductwork.sync.whole_lists import WholeList
from ductwork.upstream.schema_drift import NULL, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import (
    Record,
    Replacement,
    RowOf,
    count_rows,
    name_of,
    text_or_none,
    timestamp_or_none,
)

BATCH = "catalog"
LINKS = dict  # {"self": {"href": ...}}
PAIRINGS_LIST = f"{paths.PRODUCTS_PREFIX}/pairings"

CATALOG_ITEM_RECORD = RecordShape(
    required={"sku": str, "srn": str, "type": str, "_links": LINKS},
    notes={
        "sku": "SKU (string).",
        "srn": "Service reference number (string).",
        "type": "Route slug of the product's type.",
        "_links": "`{self: {href}}`: the record's path.",
    },
)
UNIT_RECORD = RecordShape(
    required={
        "sku": str, "srn": str, "brand": str, "category": str, "subcategory": str,
        "series": dict, "family": dict, "description": (str, NULL), "status": str,
        "specifications": dict, "performance": (dict, NULL), "compatibility": dict,
        "images": list, "updatedAt": str, "_links": LINKS,
    },
    optional={"x-legacyCode": (str, NULL)},
    notes={
        "sku": "SKU (string).",
        "srn": "Service reference number (string).",
        "brand": "Brand; the `brand` filter matches it exactly, ignoring case.",
        "category": "`INDOOR` or `OUTDOOR`.",
        "subcategory": "e.g. `Wall Mounted`, `Ducted`, `Branch Box`.",
        "series": "`{name}`; the `series.name` filter matches it.",
        "family": "`{name}`; the `family.name` filter matches it.",
        "status": "`Active` or `Discontinued`.",
        "specifications": "Free-form object; each type adds members of its own.",
        "performance": "Capacities and efficiencies, or null.",
        "compatibility": "`{compatibleSkus: [string]}`.",
        "images": "`[{url, kind, width, height}]`.",
        "updatedAt": "Date-time.",
        "_links": "`{self: {href}}`: the record's path.",
    },
)  # fmt: skip
PAIRING_RECORD = RecordShape(
    required={"relationshipId": int, "relType": str, "products": list, "updatedAt": str},
    notes={
        "relationshipId": "Integer id.",
        "relType": "`Pairing`, `Standalone` or `Combinations`.",
        "products": "Up to three `{position, sku, srn, type, _links}`.",
        "updatedAt": "Date-time.",
    },
)

CATALOG_ITEM_COLUMNS = Columns(
    ("sku", "string"), ("srn", "string"), ("unit_type", "string"),
    ("href", "string"), ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
UNIT_COLUMNS = Columns(
    ("unit_type", "string"), ("sku", "string"), ("srn", "string"),
    ("brand", "string"), ("category", "string"), ("subcategory", "string"),
    ("series_name", "string"), ("family_name", "string"),
    ("description", "string"), ("status", "string"), ("updated_at", "timestamp"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
PAIRING_COLUMNS = Columns(
    ("relationship_id", "int64"), ("rel_type", "string"), ("updated_at", "timestamp"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
PAIRING_PRODUCT_COLUMNS = Columns(
    ("relationship_id", "int64"), ("position", "string"), ("sku", "string"),
    ("srn", "string"), ("unit_type", "string")
)  # fmt: skip
PAIRING_PRODUCTS = Table("pairing_products", ("relationship_id", "position"))


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


def pairing_products(pairings: list[Record]) -> list[Replacement]:
    """One row per product slot of every pairing, in place of the stored slots."""
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
    return [Replacement(PAIRING_PRODUCTS, PAIRING_PRODUCT_COLUMNS.table(rows))]


def _by_sku(record: Record) -> str:
    return record["sku"]


def _by_relationship(record: Record) -> int:
    return int(record["relationshipId"])


def _unit_step(slug: str) -> Step:
    return Step(
        asset=slug.replace("-", "_"),
        description=f"Full unit records of /products/v2.0/{slug}, in table `units`.",
        reader=WholeList(
            paths.unit_path(slug), _by_sku, unit_row_for(slug), UNIT_COLUMNS, UNIT_RECORD
        ),
        table=Table("units", ("unit_type", "sku"), "unit_type", slug),
        batch=BATCH,
    )


PRODUCTS = Stream(
    name="products",
    family=Family.PRODUCTS,
    key="sku",
    path=paths.PRODUCTS_LIST,
    description="The product catalog: every product's list item, and each unit's full record.",
    cadence=HOURLY,
    shape=UNIT_RECORD,
    steps=(
        Step(
            asset="catalog_items",
            description="Every product of /products/v2.0/products (SKU, SRN, type, link), by SKU.",
            reader=WholeList(
                paths.PRODUCTS_LIST,
                _by_sku,
                catalog_item_row,
                CATALOG_ITEM_COLUMNS,
                CATALOG_ITEM_RECORD,
            ),
            table=Table("catalog_items", ("sku",)),
            batch=BATCH,
        ),
        *(_unit_step(slug) for slug in paths.UNIT_SLUGS),
    ),
    serving=Serving.CATALOG,
    serves_below=paths.PRODUCTS_PREFIX + "/",
)

PAIRINGS = Stream(
    name="pairings",
    family=Family.PRODUCTS,
    key="relationshipId",
    path=PAIRINGS_LIST,
    description="Product relationships: pairings, standalone units and combinations.",
    cadence=HOURLY,
    shape=PAIRING_RECORD,
    steps=(
        Step(
            asset="pairings",
            description=(
                "Pairings and relationships (up to 3 products each) from "
                "/products/v2.0/pairings, in tables `pairings` and `pairing_products`."
            ),
            reader=WholeList(
                PAIRINGS_LIST,
                _by_relationship,
                pairing_row,
                PAIRING_COLUMNS,
                PAIRING_RECORD,
                beside=pairing_products,
                facts=lambda con: {"product_slots": count_rows(con, PAIRING_PRODUCTS)},
            ),
            table=Table("pairings", ("relationship_id",)),
            batch=BATCH,
            warnings=(
                Warning(
                    "pairing_products_resolve_to_catalog",
                    "Every SKU a pairing names is in the catalog (a warning: pairings may run "
                    "ahead of the catalog; the JSON is served unchanged either way).",
                    "skus_missing",
                    after=("catalog_items",),
                ),
            ),
        ),
    ),
    serving=Serving.CATALOG,
    extra_tables=(PAIRING_PRODUCTS,),
)
