"""Serving indexes over the catalog: sorted unit lists with folded filter keys, catalog items,
lookups by SKU, pairings by id, SKU and type, and the indoor-models body.

Built once from the unit and pairing records, and again after a mutation changes products.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ductwork.contract.paths import UNIT_SLUGS
from sandbox.catalog_records import indoor_model
from sandbox.compact_json import dumps_compact as dumps

Record = dict[str, Any]
Filters = tuple[str, str, str]  # series.name, family.name, brand, folded to lower case


@dataclass
class TypedList:
    """One type's units in SKU byte order, with their folded filter values."""

    bodies: list[bytes] = field(default_factory=list)
    filters: list[Filters] = field(default_factory=list)
    by_sku: dict[str, bytes] = field(default_factory=dict)

    def matching(self, wanted: tuple[str | None, str | None, str | None]) -> list[bytes]:
        """Bodies whose folded filters equal every given (non-None) value."""
        if wanted == (None, None, None):
            return self.bodies
        series, family, brand = wanted
        return [
            body
            for body, (s, f, b) in zip(self.bodies, self.filters, strict=True)
            if (series is None or s == series)
            and (family is None or f == family)
            and (brand is None or b == brand)
        ]


@dataclass
class CatalogView:
    """Everything the product and pairing paths answer from."""

    typed: dict[str, TypedList]
    items: list[bytes]
    items_by_slug: dict[str, list[bytes]]
    resolver: dict[str, bytes]
    pairing_bodies: list[bytes]
    pairing_by_id: dict[int, bytes]
    pairings_by_sku: dict[str, list[int]]
    pairings_by_type: dict[str, list[int]]
    pairing_types: list[str]
    indoor_models: bytes


def build_catalog_view(units: dict[str, list[Record]], pairings: list[Record]) -> CatalogView:
    """Index units and pairings for serving (strings sort by code point = UTF-8 byte order)."""
    typed: dict[str, TypedList] = {}
    item_rows: list[tuple[str, bytes]] = []
    items_by_slug: dict[str, list[bytes]] = {}
    resolver: dict[str, bytes] = {}
    for slug in UNIT_SLUGS:
        listing = TypedList()
        slug_items = []
        for unit in sorted(units[slug], key=lambda record: record["sku"]):
            body = dumps(unit)
            listing.bodies.append(body)
            listing.filters.append(
                (
                    unit["series"]["name"].lower(),
                    unit["family"]["name"].lower(),
                    unit["brand"].lower(),
                )
            )
            listing.by_sku[unit["sku"]] = body
            resolver[unit["sku"]] = body
            item = dumps(
                {"sku": unit["sku"], "srn": unit["srn"], "type": slug, "_links": unit["_links"]}
            )
            slug_items.append(item)
            item_rows.append((unit["sku"], item))
        typed[slug] = listing
        items_by_slug[slug] = slug_items
    item_rows.sort(key=lambda row: row[0])

    ordered = sorted(pairings, key=lambda pairing: pairing["relationshipId"])
    bodies = [dumps(pairing) for pairing in ordered]
    by_sku: dict[str, list[int]] = defaultdict(list)
    by_type: dict[str, list[int]] = defaultdict(list)
    for index, pairing in enumerate(ordered):
        for sku in dict.fromkeys(product["sku"] for product in pairing["products"]):
            by_sku[sku].append(index)
        by_type[pairing["relType"]].append(index)
    models = [indoor_model(unit) for unit in sorted(units["indoor-units"], key=lambda u: u["sku"])]
    return CatalogView(
        typed=typed,
        items=[body for _, body in item_rows],
        items_by_slug=items_by_slug,
        resolver=resolver,
        pairing_bodies=bodies,
        pairing_by_id={p["relationshipId"]: body for p, body in zip(ordered, bodies, strict=True)},
        pairings_by_sku=dict(by_sku),
        pairings_by_type=dict(by_type),
        pairing_types=[pairing["relType"] for pairing in ordered],
        indoor_models=dumps({"success": True, "data": models}),
    )
