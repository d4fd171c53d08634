"""Product catalog assets: the catalog list, the six typed unit lists and the pairings.

The eight lists are eight assets materialised by one multi-asset step (``catalog``).
"""

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present, pairing_products_resolve
from assets.ingest import INGEST_RETRY, OWNERS, WAREHOUSE_POOL, Fetched, fetch, run_metadata
from assets.list_reader import ListRead, PagesDigest, digest_pages, read_whole_list
from assets.loading import (
    Held,
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
from assets.schema_drift import CATALOG_ITEM_RECORD, PAIRING_RECORD, UNIT_RECORD, RecordShape
from ductwork.contract import paths
from pipelines.resources import UpstreamResource
from pipelines.upstream_client import UpstreamClient

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


# Writes a list's records (the content read, named after the list) in place of the stored ones.
ListWrite = Callable[[duckdb.DuckDBPyConnection, list[Record], ListContent], None]


def _by_sku(record: Record) -> Hashable:
    return record["sku"]


def _by_relationship(record: Record) -> Hashable:
    return int(record["relationshipId"])


def _write_catalog_items(
    con: duckdb.DuckDBPyConnection, records: list[Record], content: ListContent
) -> None:
    table = rows_table(records, catalog_item_row, CATALOG_ITEM_SCHEMA)
    replace_rows(con, Replacement("catalog_items", table), content=content)


def _unit_write(slug: str) -> ListWrite:
    """The writer of one typed unit list: its slice of ``units``."""
    row_of = unit_row_for(slug)

    def write(con: duckdb.DuckDBPyConnection, records: list[Record], content: ListContent) -> None:
        table = rows_table(records, row_of, UNIT_SCHEMA)
        replace_rows(con, Replacement("units", table, "unit_type = ?", [slug]), content=content)

    return write


def _write_pairings(
    con: duckdb.DuckDBPyConnection, records: list[Record], content: ListContent
) -> None:
    """``pairings`` and ``pairing_products`` together."""
    table = rows_table(records, pairing_row, PAIRING_SCHEMA)
    products = pairing_product_rows(records)
    replace_rows(
        con,
        Replacement("pairings", table),
        Replacement("pairing_products", products),
        content=content,
    )


def _no_facts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {}


def _pairing_facts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    slots = con.execute("SELECT count(*) FROM pairing_products").fetchall()[0][0]
    return {"product_slots": slots}


@dataclass(frozen=True)
class CatalogList:
    """One list of the catalog family: where it is read, how records are keyed and stored."""

    name: str
    path: str
    key: Callable[[Record], Hashable]
    write: ListWrite
    held: Held
    shape: RecordShape
    description: str
    facts: Callable[[duckdb.DuckDBPyConnection], dict[str, int]] = _no_facts


CATALOG_LISTS: list[CatalogList] = [
    CatalogList(
        "catalog_items", paths.PRODUCTS_LIST, _by_sku, _write_catalog_items,
        Held("catalog_items"), CATALOG_ITEM_RECORD,
        "Every product of /products/v2.0/products (SKU, SRN, type, link), by SKU.",
    ),
    *(
        CatalogList(
            slug.replace("-", "_"), paths.unit_path(slug), _by_sku, _unit_write(slug),
            Held("units", "unit_type = ?", (slug,)), UNIT_RECORD,
            f"Full unit records of /products/v2.0/{slug}, in table `units`.",
        )
        for slug in paths.UNIT_SLUGS
    ),
    CatalogList(
        "pairings", paths.PAIRINGS_LIST, _by_relationship, _write_pairings, Held("pairings"),
        PAIRING_RECORD,
        "Pairings and relationships (up to 3 products each) from /products/v2.0/pairings, in "
        "tables `pairings` and `pairing_products`.",
        _pairing_facts,
    ),
]  # fmt: skip
CATALOG_KEYS: list[dg.AssetKey] = [dg.AssetKey(item.name) for item in CATALOG_LISTS]


def _report(
    item: CatalogList,
    con: duckdb.DuckDBPyConnection,
    fetched: Fetched[Any],
    rows: int,
    unchanged: bool,
    pages: int,
    reported_total: int,
    reads: int,
    drift: dict[str, int],
) -> dg.MaterializeResult:
    """The list's metadata; ``reads`` is 0 when the pages were found unchanged unparsed."""
    return dg.MaterializeResult(
        asset_key=item.name,
        metadata=run_metadata(
            fetched,
            rows,
            unchanged=unchanged,
            **item.facts(con),
            pages=pages,
            reported_total=reported_total,
            reads=reads,
            **drift,
        ),
    )


def _mirror(
    upstream: UpstreamResource, con: duckdb.DuckDBPyConnection, item: CatalogList
) -> dg.MaterializeResult:
    """Store one list unless unchanged, and report what it cost.

    A list whose last write is still held is first fetched unparsed, and its pages' digest
    compared with the stored one (the catalog has no ``updatedAfter``). Only a list that
    differs is read in full and parsed, which fetches it a second time.
    """
    stored = ListContent.last_stored(con, item.name)
    held = stored is not None and stored.still_held(con, item.held)
    known_drift = stored.recorded_drift(con) if stored is not None and held else None

    async def read(client: UpstreamClient) -> PagesDigest | ListRead:
        if stored is not None and known_drift is not None:
            probed = await digest_pages(client, item.path)
            if probed.digest == stored.digest:
                return probed
        return await read_whole_list(client, item.path, item.key)

    fetched = fetch(upstream, read)
    whole = fetched.value
    if not isinstance(whole, ListRead):  # the very pages last stored, found unparsed
        return _report(
            item, con, fetched, whole.reported_total, True, whole.pages, whole.reported_total,
            0, known_drift or {},
        )  # fmt: skip
    content = ListContent(item.name, whole.digest, len(whole.records))
    unchanged = held and content == stored
    if not unchanged:
        item.write(con, whole.records, content)
    drift = content.drift(con, item.shape, whole.records)
    return _report(
        item, con, fetched, len(whole.records), unchanged, whole.pages, whole.reported_total,
        whole.attempts, drift,
    )  # fmt: skip


@dg.multi_asset(
    name="catalog",
    specs=[
        dg.AssetSpec(
            item.name, group_name=GROUP, kinds=KINDS, owners=OWNERS, description=item.description
        )
        for item in CATALOG_LISTS
    ],
    can_subset=True,
    pool=WAREHOUSE_POOL,
    retry_policy=INGEST_RETRY,
)
def catalog(
    context: dg.AssetExecutionContext, upstream: UpstreamResource, warehouse: DuckDBResource
) -> Iterator[dg.MaterializeResult]:
    """Mirror the selected catalog lists, one after another, in one step.

    One step rather than one per list: a step costs Dagster about 25 ms, a good part of a run
    in which the catalog has not changed. Each list is committed and reported as soon as it is
    stored, so a failure later in the step loses none of them.
    """
    selected = context.selected_asset_keys
    with open_warehouse(warehouse) as con:
        for item, key in zip(CATALOG_LISTS, CATALOG_KEYS, strict=True):
            if key in selected:
                yield _mirror(upstream, con, item)


CATALOG_ASSETS: list[dg.AssetsDefinition] = [catalog]
CATALOG_CHECKS: list[AssetRule] = [
    keys_unique_and_present(CATALOG_KEYS[0], "catalog_items", ["sku"]),
    *(
        keys_unique_and_present(key, "units", ["sku"], "unit_type = ?", [slug])
        for key, slug in zip(CATALOG_KEYS[1:-1], paths.UNIT_SLUGS, strict=True)
    ),
    keys_unique_and_present(CATALOG_KEYS[-1], "pairings", ["relationship_id"]),
    pairing_products_resolve(CATALOG_KEYS[-1]),
]
