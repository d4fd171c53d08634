"""The whole generated dataset of one (seed, scale, public URL): the same inputs always give
the same records, byte for byte."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sandbox.asset_records import make_assets
from sandbox.catalog_records import make_contractors, make_pairings, make_units
from sandbox.compact_json import dumps_compact as dumps
from sandbox.lead_records import LeadMaker
from sandbox.record_tables import AssetTable, LeadList

Record = dict[str, Any]

SCALES: dict[str, dict[str, int]] = {
    # For tests whose every request may cost a second (429s with Retry-After).
    "tiny": {"products": 400, "assets": 3_000, "leads": 2_000},
    "small": {"products": 3_000, "assets": 20_000, "leads": 15_000},
    "medium": {"products": 20_000, "assets": 200_000, "leads": 100_000},
    "large": {"products": 50_000, "assets": 1_000_000, "leads": 500_000},
}
PAIRINGS_PER_PRODUCT = 0.5


@dataclass
class Dataset:
    """Every record the sandbox starts with."""

    units: dict[str, list[Record]]
    pairings: list[Record]
    submittals: list[Record]
    assets: AssetTable
    leads: LeadList
    lead_maker: LeadMaker
    contractors: list[Record]


def generate(seed: int, scale: str, public_url: str) -> Dataset:
    """Generate the dataset; ``public_url`` is the base of product image URLs."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}")
    sizes = SCALES[scale]
    rng = random.Random(seed)
    units = make_units(rng, sizes["products"], public_url)
    pairings, submittals = make_pairings(
        rng, units, round(sizes["products"] * PAIRINGS_PER_PRODUCT)
    )
    contractors = make_contractors(rng)
    skus = [unit["sku"] for records in units.values() for unit in records]
    asset_keys, asset_bodies = make_assets(random.Random(f"assets:{seed}"), sizes["assets"], skus)
    maker = LeadMaker(seed, sizes["leads"])
    return Dataset(
        units=units,
        pairings=pairings,
        submittals=submittals,
        assets=AssetTable(asset_keys, asset_bodies),
        leads=make_lead_list(maker),
        lead_maker=maker,
        contractors=contractors,
    )


def make_lead_list(maker: LeadMaker) -> LeadList:
    """Every generated lead's list item, serialised and ordered by (CreatedDate, Id)."""
    keys: list[tuple[str, str]] = []
    bodies: list[bytes] = []
    for number in range(maker.count):
        item, _ = maker.make(number, with_detail=False)
        keys.append((item["CreatedDate"], item["Id"]))
        bodies.append(dumps(item))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return LeadList([keys[i] for i in order], [bodies[i] for i in order])
