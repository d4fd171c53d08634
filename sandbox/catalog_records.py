"""Product catalog records: units of the six types, pairings, submittals, contractors and
indoor models, built deterministically from one ``random.Random``.

Adversarial where the contract allows: SKUs needing percent-encoding (space, ``+``, ``#``,
``%``, ``.``, non-ASCII) whose byte order is not their case-insensitive order, filter values
in mixed case, unknown members, pairings naming SKUs the catalog lacks.
"""

from __future__ import annotations

import random
from typing import Any

from ductwork.contract.encoding import quote_sku
from ductwork.contract.paths import PRODUCTS_PREFIX, UNIT_SLUGS, UNITS_RESOLVER
from sandbox.timeline import SPAN_MS, stamp

Record = dict[str, Any]

TYPE_SHARE = {
    "indoor-units": 0.40,
    "outdoor-units": 0.25,
    "branch-controllers": 0.05,
    "branch-boxes": 0.05,
    "ventilation": 0.10,
    "accessories": 0.15,
}
# Upper- and lowercase starts: byte order puts every "IU..." before every "bb...".
TYPE_PREFIX = {
    "indoor-units": "IU",
    "outdoor-units": "ou",
    "branch-controllers": "BC",
    "branch-boxes": "bb",
    "ventilation": "VE",
    "accessories": "Ac",
}
SUBCATEGORIES = {
    "indoor-units": ("Wall Mounted", "Ducted", "Ceiling Cassette", "Floor Standing"),
    "outdoor-units": ("Heat Pump", "Condenser", "VRF Outdoor"),
    "branch-controllers": ("Branch Controller",),
    "branch-boxes": ("Branch Box",),
    "ventilation": ("ERV", "HRV"),
    "accessories": ("Controller", "Sensor", "Filter", "Line Set"),
}
# Several spellings of one value: the filters match them all, case-insensitively.
BRANDS = (
    "Mitsubishi Electric",
    "MITSUBISHI ELECTRIC",
    "Trane",
    "TRANE",
    "trane",
    "Luxaire",
    "Ductwise",
    "Ölmann",
    "ÖLMANN",
)
SERIES = (
    "Hyper Heat",
    "HYPER HEAT",
    "M-Series",
    "m-series",
    "P-SERIES",
    "City Multi",
    "city multi",
    "Zuba",
    "Élan",
    "élan",
    "Sigma 21",
)
FAMILIES = (
    "Deluxe",
    "DELUXE",
    "standard",
    "Standard",
    "PRO",
    "Compact+",
    "Nordic",
    "Série Ω",
    "SÉRIE Ω",
)
ODD_SUFFIXES = (
    "",
    "",
    "",
    "",
    "",
    "",
    " HP",
    "+",
    "#2",
    "%",
    "%20",
    ".1",
    "-é",
    "ü",
    " Ω",
    " 2+1",
    " ñ#.",
)
CAPACITIES = (6000, 9000, 12000, 15000, 18000, 24000, 30000, 36000, 48000)
GHOST_SHARE = 0.02  # pairing slots naming a SKU the catalog lacks
STATES = ("CA", "TX", "NY", "FL", "WA", "MA", "GA", "IL", "CO", "AZ")
CONTRACTORS = 300


def unit_href(slug: str, sku: str) -> str:
    """The type-specific self link of a unit."""
    return f"{PRODUCTS_PREFIX}/{slug}/{quote_sku(sku)}"


def resolver_href(sku: str) -> str:
    """The type-independent link pairings use."""
    return f"{UNITS_RESOLVER}/{quote_sku(sku)}"


def image_url(public_url: str, sku: str, number: int) -> str:
    """Absolute URL of one product image, served by the sandbox itself under ``/media/``."""
    return f"{public_url.rstrip('/')}/media/images/{quote_sku(sku)}/{number}.png"


def make_sku(rng: random.Random, slug: str, index: int) -> tuple[str, str]:
    """A unique SKU (never with ``/``, at most 64 characters) and its plain model number."""
    model = f"{TYPE_PREFIX[slug]}{rng.choice('ABCDEFGHKMPRZ')}{index:06d}"
    head = "Ñ" if rng.random() < 0.03 else ""
    sku = f"{head}{model}{rng.choice(ODD_SUFFIXES)}"
    if rng.random() < 0.005:  # a few as long as the contract allows
        sku = (sku + " Extended Capacity Variant Ω" * 3)[:64]
    return sku, model


def _specifications(rng: random.Random, slug: str, model: str, subcategory: str) -> Record:
    """Free-form, nested specifications; each type adds its own members."""
    common: Record = {
        "modelNumber": model,
        "voltage": rng.choice((115, 208, 230)),
        "dimensions": {
            "widthIn": rng.randint(10, 60),
            "heightIn": rng.randint(8, 50),
            "depthIn": round(rng.uniform(6, 40), 2),
        },
    }
    if slug == "indoor-units":
        common |= {
            "refrigerant": "R-454B",
            "mounting": subcategory,
            "airflowCfm": rng.randint(200, 1400),
            "soundDb": round(rng.uniform(19, 45), 1),
        }
    elif slug == "outdoor-units":
        common |= {
            "refrigerant": rng.choice(("R-454B", "R-32")),
            "compressor": rng.choice(("Inverter Rotary", "Scroll")),
            "maxIndoorUnits": rng.randint(1, 8),
            "operatingRangeF": {"cooling": [-4, 115], "heating": [-13, 75]},
        }
    elif slug == "branch-controllers":
        common |= {"ports": rng.choice((4, 8, 12, 16)), "refrigerant": "R-410A"}
    elif slug == "branch-boxes":
        common |= {"ports": rng.choice((3, 5)), "maxCapacityBtuh": rng.choice(CAPACITIES)}
    elif slug == "ventilation":
        common |= {
            "airflowCfm": rng.randint(50, 1200),
            "recoveryEfficiency": round(rng.uniform(0.55, 0.85), 2),
        }
    else:
        common |= {"accessoryType": subcategory, "compatibleSeries": rng.sample(SERIES, 2)}
    return common


def make_unit(
    rng: random.Random, slug: str, sku: str, model: str, srn: str, public_url: str
) -> Record:
    """A full unit record: the members every type shares, plus type-specific specifications."""
    category = {"indoor-units": "INDOOR", "outdoor-units": "OUTDOOR"}.get(slug) or rng.choice(
        ("INDOOR", "OUTDOOR")
    )
    subcategory = rng.choice(SUBCATEGORIES[slug])
    capacity = rng.choice(CAPACITIES)
    performance = None
    if slug in ("indoor-units", "outdoor-units"):
        performance = {
            "coolingCapacityBtuh": capacity,
            "heatingCapacityBtuh": capacity + rng.choice((0, 1000, 2000)),
            "seer2": round(rng.uniform(15, 33), 1),
            "hspf2": round(rng.uniform(7.5, 11), 1) if rng.random() < 0.9 else None,
        }
    images = [
        {
            "url": image_url(public_url, sku, n),
            "kind": "hero" if n == 0 else "gallery",
            "width": 800 if n == 0 else 400,
            "height": 600 if n == 0 else 300,
        }
        for n in range(rng.choice((0, 1, 1, 2, 3)))
    ]
    record: Record = {
        "sku": sku,
        "srn": srn,
        "brand": rng.choice(BRANDS),
        "category": category,
        "subcategory": subcategory,
        "series": {"name": rng.choice(SERIES)},
        "family": {"name": rng.choice(FAMILIES)},
        "description": None if rng.random() < 0.1 else f"{subcategory} {model}, {capacity} BTU/h",
        "status": "Discontinued" if rng.random() < 0.08 else "Active",
        "specifications": _specifications(rng, slug, model, subcategory),
        "performance": performance,
        "compatibility": {"compatibleSkus": []},
        "images": images,
        "updatedAt": stamp(rng.randrange(SPAN_MS)),
        "_links": {"self": {"href": unit_href(slug, sku)}},
    }
    if rng.random() < 0.05:  # a member the contract does not list
        record["x-legacyCode"] = f"L{rng.randrange(10**6):06d}"
    return record


def make_units(rng: random.Random, products: int, public_url: str) -> dict[str, list[Record]]:
    """Every unit of every type; SKUs and SRNs unique across types."""
    units: dict[str, list[Record]] = {}
    index = 0
    for slug in UNIT_SLUGS:
        records = []
        for _ in range(round(products * TYPE_SHARE[slug])):
            index += 1
            sku, model = make_sku(rng, slug, index)
            records.append(make_unit(rng, slug, sku, model, f"SRN{index:08d}", public_url))
        units[slug] = records
    outdoor = [unit["sku"] for unit in units["outdoor-units"]]
    for unit in units["indoor-units"]:
        unit["compatibility"]["compatibleSkus"] = rng.sample(outdoor, min(3, len(outdoor)))
    return units


def pairing_product(position: str, sku: str, srn: str, slug: str) -> Record:
    """A product slot of a pairing, linking to the units resolver."""
    return {
        "position": position,
        "sku": sku,
        "srn": srn,
        "type": slug,
        "_links": {"self": {"href": resolver_href(sku)}},
    }


def make_submittal(rng: random.Random, idu: str | None, odu: str | None) -> Record:
    """Submittal data of one (indoor SRN, outdoor SRN) combination."""
    return {
        "idu": idu,
        "odu": odu,
        "ahriNumber": str(rng.randrange(10**7, 10**8)),
        "documentUrl": f"https://docs.hvac.example/submittals/{idu or '-'}_{odu or '-'}.pdf",
        "systemPerformance": {
            "seer2": round(rng.uniform(14, 30), 1),
            "eer2": round(rng.uniform(9, 15), 1),
            "ratings": {"coolingBtuh": rng.choice(CAPACITIES)},
        },
        "updatedAt": stamp(rng.randrange(SPAN_MS)),
    }


def make_pairings(
    rng: random.Random, units: dict[str, list[Record]], count: int
) -> tuple[list[Record], list[Record]]:
    """Pairings (sorted by relationshipId, with gaps) and the submittals the contract implies:
    one per distinct Pairing (P1, P2) and per Standalone indoor or outdoor unit."""
    ghosts = 0

    def slot(position: str, slug: str, may_be_ghost: bool = True) -> Record:
        nonlocal ghosts
        if may_be_ghost and rng.random() < GHOST_SHARE:
            ghosts += 1
            return pairing_product(position, f"GHOST {ghosts:05d}é", f"SRN-G{ghosts:07d}", slug)
        unit = rng.choice(units[slug])
        return pairing_product(position, unit["sku"], unit["srn"], slug)

    pairings: list[Record] = []
    submittals: dict[tuple[str | None, str | None], Record] = {}
    for n in range(count):
        roll = rng.random()
        if roll < 0.6:
            kind = "Pairing"
            products = [slot("P1", "indoor-units"), slot("P2", "outdoor-units")]
            key = (products[0]["srn"], products[1]["srn"])
        elif roll < 0.85:
            kind = "Standalone"
            indoor = rng.random() < 0.6
            products = [slot("P1", "indoor-units" if indoor else "outdoor-units", False)]
            srn = products[0]["srn"]
            key = (srn, None) if indoor else (None, srn)
        else:
            kind = "Combinations"
            slugs = rng.sample(UNIT_SLUGS, rng.choice((2, 3)))
            products = [slot(f"P{i + 1}", slug) for i, slug in enumerate(slugs)]
            key = None
        pairing: Record = {
            "relationshipId": 1000 + n * 3 + rng.randrange(3),
            "relType": kind,
            "products": products,
            "updatedAt": stamp(rng.randrange(SPAN_MS)),
        }
        if rng.random() < 0.03:
            pairing["notes"] = "imported from the legacy matrix"
        pairings.append(pairing)
        if key is not None and key not in submittals:
            submittals[key] = make_submittal(rng, *key)
    return pairings, list(submittals.values())


def make_contractors(rng: random.Random) -> list[Record]:
    """Contractors with their reviews (served as a JSON text)."""
    contractors = []
    for n in range(CONTRACTORS):
        reviews = [
            {
                "reviewId": f"R-{n}-{k}",
                "rating": rng.randint(1, 5),
                "text": rng.choice(("Great install", "On time, tidy", "Très bien", 'Slow "quote"')),
                "createdAt": stamp(rng.randrange(SPAN_MS)),
            }
            for k in range(rng.randrange(0, 6))
        ]
        contractors.append(
            {
                "contractorId": f"C-{n:04d}",
                "name": f"Contractor {n} Heating & Air",
                "city": rng.choice(("Springfield", "Öxnard", "Austin")),
                "state": rng.choice(STATES),
                "rating": round(rng.uniform(2.5, 5), 1),
                "reviews": reviews,
            }
        )
    return contractors


def indoor_model(unit: Record) -> Record:
    """The indoor-models item derived from one indoor unit."""
    return {
        "model": unit["specifications"]["modelNumber"],
        "sku": unit["sku"],
        "series": unit["series"]["name"],
        "family": unit["family"]["name"],
        "capacityBtuh": (unit.get("performance") or {}).get("coolingCapacityBtuh"),
    }
