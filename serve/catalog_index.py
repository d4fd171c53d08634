"""The product catalog of one snapshot, held in memory as ready-to-send record JSON.

DuckDB is built for scans, not thousands of tiny concurrent lookups, so each API worker loads
the catalog once per snapshot: records keep their stored JSON bytes, ordered by the contract's
keys, with small indexes for the filters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import duckdb

from ductwork.contract import envelopes
from ductwork.contract.params import page_bounds, pagination
from ductwork.contract.paths import UNIT_SLUGS
from ductwork.streams.registry import PAIRINGS, PRODUCTS
from warehouse_sql import stream_section

UNIT_FILTERS: tuple[str, ...] = ("series.name", "family.name", "brand")
Envelope = Callable[[Sequence[bytes], dict[str, int]], bytes]


@dataclass
class OrderedRecords:
    """Records in their list order, with the positions of each value of each filter."""

    filter_names: tuple[str, ...] = ()
    keys: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    filter_values: list[tuple[str | None, ...]] = field(default_factory=list)
    positions: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def add(self, key: str, body: bytes, values: tuple[str | None, ...] = ()) -> None:
        """Append a record; callers add them in list order."""
        position = len(self.keys)
        self.keys.append(key)
        self.bodies.append(body)
        self.filter_values.append(values)
        for name, value in zip(self.filter_names, values, strict=True):
            if value is not None:
                self.positions.setdefault(name, defaultdict(list))[value].append(position)

    def select(self, wanted: dict[str, str]) -> Sequence[int]:
        """Positions of records whose filter values equal every wanted value."""
        if not wanted:
            return range(len(self.keys))
        candidates = min(
            (self.positions.get(name, {}).get(value, []) for name, value in wanted.items()),
            key=len,
        )
        checks = [(self.filter_names.index(name), value) for name, value in wanted.items()]
        return [p for p in candidates if all(self.filter_values[p][i] == v for i, v in checks)]


@dataclass
class CatalogIndex:
    """Everything the product family of the read API answers from."""

    catalog: OrderedRecords
    catalog_by_type: dict[str, OrderedRecords]
    units: dict[str, OrderedRecords]
    unit_position: dict[str, dict[str, int]]
    resolver: dict[str, bytes]
    pairings: OrderedRecords
    pairing_position: dict[int, int]
    pairings_by_sku: dict[str, list[int]]

    def product_page(self, category: str | None, page: int, count: int) -> bytes:
        """A page of /products, optionally one route slug only."""
        records = self.catalog if category is None else self.catalog_by_type[category]
        return _page(records, range(len(records.keys)), page, count, envelopes.product_list)

    def unit_page(self, slug: str, wanted: dict[str, str], page: int, count: int) -> bytes:
        """A page of one typed unit list, filtered."""
        records = self.units[slug]
        return _page(records, records.select(wanted), page, count, envelopes.product_list)

    def unit(self, slug: str, sku: str) -> bytes | None:
        """One unit record of the given type, or None."""
        position = self.unit_position[slug].get(sku)
        return None if position is None else self.units[slug].bodies[position]

    def pairing_page(self, sku: str | None, rel_type: str | None, page: int, count: int) -> bytes:
        """A page of pairings, filtered by a product SKU and/or relationship type."""
        wanted = {} if rel_type is None else {"relType": rel_type}
        selected = self.pairings.select(wanted)
        if sku is not None:
            with_sku = self.pairings_by_sku.get(sku, [])
            selected = with_sku if rel_type is None else sorted(set(with_sku) & set(selected))
        return _page(
            self.pairings, selected, page, count, partial(envelopes.nested_list, "pairings")
        )

    def pairing(self, relationship_id: int) -> bytes | None:
        """One pairing, or None."""
        position = self.pairing_position.get(relationship_id)
        return None if position is None else self.pairings.bodies[position]


def _page(records, selected, page, count, envelope) -> bytes:
    start, end = page_bounds(page, count)
    bodies = [records.bodies[p] for p in selected[start:end]]
    return envelope(bodies, pagination(page, count, len(selected)))


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


def load_catalog(con: duckdb.DuckDBPyConnection) -> CatalogIndex:
    """Build the index from a snapshot's catalog tables."""
    catalog = OrderedRecords()
    catalog_by_type = {slug: OrderedRecords() for slug in UNIT_SLUGS}
    for sku, unit_type, record in con.execute(
        stream_section(PRODUCTS.sql, "served_items")
    ).fetchall():
        body = record.encode()
        catalog.add(sku, body)
        if unit_type in catalog_by_type:
            catalog_by_type[unit_type].add(sku, body)

    units = {slug: OrderedRecords(UNIT_FILTERS) for slug in UNIT_SLUGS}
    for slug, sku, series, family, brand, record in con.execute(
        stream_section(PRODUCTS.sql, "served_units")
    ).fetchall():
        if slug in units:
            units[slug].add(sku, record.encode(), (_lower(series), _lower(family), _lower(brand)))
    unit_position = {
        slug: {sku: i for i, sku in enumerate(records.keys)} for slug, records in units.items()
    }
    resolver: dict[str, bytes] = {}
    for slug in reversed(UNIT_SLUGS):  # the first type in spec order wins a shared SKU
        resolver.update(zip(units[slug].keys, units[slug].bodies, strict=True))

    pairings = OrderedRecords(("relType",))
    for relationship_id, rel_type, record in con.execute(
        stream_section(PAIRINGS.sql, "served")
    ).fetchall():
        pairings.add(str(relationship_id), record.encode(), (rel_type,))
    pairing_position = {int(key): i for i, key in enumerate(pairings.keys)}
    pairings_by_sku: dict[str, set[int]] = defaultdict(set)
    for relationship_id, sku in con.execute(stream_section(PAIRINGS.sql, "served_skus")).fetchall():
        if relationship_id in pairing_position:
            pairings_by_sku[sku].add(pairing_position[relationship_id])
    return CatalogIndex(
        catalog=catalog,
        catalog_by_type=catalog_by_type,
        units=units,
        unit_position=unit_position,
        resolver=resolver,
        pairings=pairings,
        pairing_position=pairing_position,
        pairings_by_sku={sku: sorted(found) for sku, found in pairings_by_sku.items()},
    )
