"""Product catalog assets: the catalog list, the six typed unit lists and the pairings.

The eight lists are eight assets materialised by one multi-asset step (``catalog``).
"""

from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present, pairing_products_resolve
from assets.ingest import (
    INGEST_RETRY,
    OWNERS,
    WAREHOUSE_POOL,
    Fetched,
    fetch,
    fetch_each,
    run_metadata,
)
from assets.interrupts import stops_on_interrupt
from assets.resources import UpstreamResource, open_warehouse
from ductwork.contract import paths
from ductwork.store.columns import Columns
from ductwork.store.loading import (
    Held,
    ListContent,
    Record,
    Replacement,
    RowOf,
    name_of,
    replace_rows,
    rows_table,
    text_or_none,
    timestamp_or_none,
)
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.list_reader import digest_known_pages, read_whole_list
from ductwork.upstream.schema_drift import (
    CATALOG_ITEM_RECORD,
    PAIRING_RECORD,
    UNIT_RECORD,
    RecordShape,
)

if TYPE_CHECKING:
    import pyarrow as pa

GROUP = "catalog"
KINDS = {"api", "duckdb"}

CATALOG_ITEM_SCHEMA = Columns(
    ("sku", "string"), ("srn", "string"), ("unit_type", "string"),
    ("href", "string"), ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
UNIT_SCHEMA = Columns(
    ("unit_type", "string"), ("sku", "string"), ("srn", "string"),
    ("brand", "string"), ("category", "string"), ("subcategory", "string"),
    ("series_name", "string"), ("family_name", "string"),
    ("description", "string"), ("status", "string"), ("updated_at", "timestamp"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
PAIRING_SCHEMA = Columns(
    ("relationship_id", "int64"), ("rel_type", "string"), ("updated_at", "timestamp"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
PAIRING_PRODUCT_SCHEMA = Columns(
    ("relationship_id", "int64"), ("position", "string"), ("sku", "string"),
    ("srn", "string"), ("unit_type", "string")
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


def pairing_product_rows(pairings: list[Record]) -> "pa.Table":
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
    return PAIRING_PRODUCT_SCHEMA.table(rows)


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


@dataclass(frozen=True)
class _Stored:
    """What the warehouse holds of one list, as the last write of it left it."""

    content: ListContent | None
    held: bool  # the list's rows are still there, as many as that write stored
    drift: dict[str, int] | None  # the schema-drift counts recorded for that very content

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, item: CatalogList) -> "_Stored":
        """The list's stored state, read from the warehouse."""
        content = ListContent.last_stored(con, item.name)
        held = content is not None and content.still_held(con, item.held)
        drift = content.recorded_drift(con) if content is not None and held else None
        return cls(content, held, drift)

    @property
    def pages_to_probe(self) -> int:
        """How many pages a probe must compare (0: read the list in full instead)."""
        return self.content.pages if self.content is not None and self.drift is not None else 0


def _probe(item: CatalogList, stored: _Stored) -> Callable[[UpstreamClient], Awaitable[str | None]]:
    return lambda client: digest_known_pages(client, item.path, stored.pages_to_probe)


def _mirror(
    upstream: UpstreamResource,
    con: duckdb.DuckDBPyConnection,
    item: CatalogList,
    stored: _Stored,
    probe: Fetched[str | None] | None,
) -> dg.MaterializeResult:
    """Store one list unless unchanged, and report what it cost.

    ``probe`` is the digest of the list's pages fetched unparsed, when its last write is still
    held (the catalog has no ``updatedAfter``). A list whose pages all came back as stored is
    done; any other is read in full and parsed, which fetches it a second time.
    """
    if probe is not None and stored.content is not None and probe.value == stored.content.digest:
        rows = stored.content.rows  # a consistent read found as many records as reported
        return _report(
            item, con, probe, rows, True, stored.content.pages, rows, 0, stored.drift or {}
        )
    fetched = fetch(upstream, lambda client: read_whole_list(client, item.path, item.key))
    whole = fetched.value
    if probe is not None:
        fetched = fetched.after(probe)
    content = ListContent(item.name, whole.digest, len(whole.records), whole.pages)
    unchanged = stored.held and content == stored.content
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
@stops_on_interrupt
def catalog(
    context: dg.AssetExecutionContext, upstream: UpstreamResource, warehouse: DuckDBResource
) -> Iterator[dg.MaterializeResult]:
    """Mirror the selected catalog lists in one step: probe every list still held at once,
    then read in full, one after another, those that changed.

    One step rather than one per list: each step has a fixed cost in Dagster, a good part of a
    run in which the catalog has not changed. Each list is committed and reported as soon as it is
    stored, so a failure later in the step loses none of them.
    """
    selected = context.selected_asset_keys
    with open_warehouse(warehouse) as con:
        chosen = [i for i, key in zip(CATALOG_LISTS, CATALOG_KEYS, strict=True) if key in selected]
        stored = {item.name: _Stored.of(con, item) for item in chosen}
        probes = fetch_each(
            upstream,
            {i.name: _probe(i, stored[i.name]) for i in chosen if stored[i.name].pages_to_probe},
        )
        for item in chosen:
            yield _mirror(upstream, con, item, stored[item.name], probes.get(item.name))


CATALOG_ASSETS: list[dg.AssetsDefinition] = [catalog]
CATALOG_CHECKS: list[AssetRule] = [
    keys_unique_and_present(CATALOG_KEYS[0], "catalog_items", ["sku"]),
    *(
        keys_unique_and_present(key, "units", ["unit_type", "sku"], "unit_type = ?", [slug])
        for key, slug in zip(CATALOG_KEYS[1:-1], paths.UNIT_SLUGS, strict=True)
    ),
    keys_unique_and_present(CATALOG_KEYS[-1], "pairings", ["relationship_id"]),
    pairing_products_resolve(CATALOG_KEYS[-1]),
]
