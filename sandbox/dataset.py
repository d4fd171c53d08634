"""Deterministic, adversarial data for the sandbox upstream.

The same seed, scale and public URL always give the same records. Where the contract allows,
the data is hostile to naive clients: SKUs that need percent-encoding and sort differently by
bytes than by letters, filter values in mixed case, hundreds of assets sharing one updatedAt,
thousands of leads sharing one CreatedDate, unknown members, pairings naming SKUs the catalog
lacks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ductwork.contract.encoding import dumps, format_datetime, quote_sku
from ductwork.contract.paths import PRODUCTS_PREFIX, UNIT_SLUGS, UNITS_RESOLVER

Record = dict[str, Any]

SCALES: dict[str, dict[str, int]] = {
    "small": {"products": 3_000, "assets": 20_000, "leads": 15_000},
    "medium": {"products": 20_000, "assets": 200_000, "leads": 100_000},
    "large": {"products": 50_000, "assets": 1_000_000, "leads": 500_000},
}
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
SPAN_MS = 540 * 86_400_000  # data spans about 18 months after EPOCH

TYPE_SHARE = {
    "indoor-units": 0.40, "outdoor-units": 0.25, "branch-controllers": 0.05,
    "branch-boxes": 0.05, "ventilation": 0.10, "accessories": 0.15,
}  # fmt: skip
TYPE_PREFIX = {
    "indoor-units": "IU", "outdoor-units": "ou", "branch-controllers": "BC",
    "branch-boxes": "bb", "ventilation": "VE", "accessories": "Ac",
}  # fmt: skip
SUBCATEGORIES = {
    "indoor-units": ["Wall Mounted", "Ducted", "Ceiling Cassette", "Floor Standing"],
    "outdoor-units": ["Heat Pump", "Condenser", "VRF Outdoor"],
    "branch-controllers": ["Branch Controller"],
    "branch-boxes": ["Branch Box"],
    "ventilation": ["ERV", "HRV"],
    "accessories": ["Controller", "Sensor", "Filter", "Line Set"],
}
BRANDS = ["Mitsubishi Electric", "TRANE", "trane", "Luxaire", "Ductwise", "Ölmann"]
SERIES = ["Hyper Heat", "M-Series", "P-SERIES", "city multi", "Zuba", "Élan", "Sigma 21"]
FAMILIES = ["Deluxe", "standard", "PRO", "Compact+", "Nordic", "Série Ω"]
ODD_SUFFIXES = ["", "", "", "", " HP", "+", "#2", "%", ".1", "-é", "ü", " / "]
ASSET_TYPES = ["Manual", "Brochure", "Spec Sheet", "Submittal", "Image", "Video"]
MIME = {"Manual": "application/pdf", "Brochure": "application/pdf",
        "Spec Sheet": "application/pdf", "Submittal": "application/pdf",
        "Image": "image/png", "Video": "video/mp4"}  # fmt: skip
LEAD_STATUSES = ["New", "Working", "Qualified", "Nurturing", "Converted", "Closed - Lost"]
PURCHASE_STATUSES = ["Researching", "Quoted", "Purchased", "Not Purchased"]
LEAD_SOURCES = ["Web", "Dealer Locator", "Phone", "Trade Show", "Partner"]
STATES = ["CA", "TX", "NY", "FL", "WA", "MA", "GA", "IL", "CO", "AZ"]
BUSINESS_UNITS = ["Residential", "Commercial", "Light Commercial"]


def at(ms: int) -> str:
    """A contract date-time ``ms`` milliseconds after EPOCH."""
    return format_datetime(EPOCH + timedelta(milliseconds=ms))


@dataclass
class Dataset:
    """Every record the sandbox serves, as generated."""

    units: dict[str, list[Record]] = field(default_factory=dict)
    pairings: list[Record] = field(default_factory=list)
    submittals: list[Record] = field(default_factory=list)
    assets: list[Record] = field(default_factory=list)
    leads: list[Record] = field(default_factory=list)
    lead_details: dict[str, Record] = field(default_factory=dict)
    contractors: list[Record] = field(default_factory=list)


def make_sku(rng: random.Random, slug: str, index: int) -> str:
    """A unique SKU; some need percent-encoding, some start lowercase or non-ASCII."""
    suffix = rng.choice(ODD_SUFFIXES).replace(" / ", " ")  # never a slash
    head = TYPE_PREFIX[slug]
    if rng.random() < 0.03:
        head = "Ñ" + head
    return f"{head}{rng.choice('ABCDEFGHKMPRZ')}{index:06d}{suffix}"


def unit_href(slug: str, sku: str) -> str:
    """The type-specific self link of a unit."""
    return f"{PRODUCTS_PREFIX}/{slug}/{quote_sku(sku)}"


def make_unit(rng: random.Random, slug: str, sku: str, srn: str, public_url: str) -> Record:
    """A full unit record with the members every type shares, plus its own specifications."""
    category = {"indoor-units": "INDOOR", "outdoor-units": "OUTDOOR"}.get(
        slug, rng.choice(["INDOOR", "OUTDOOR"])
    )
    capacity = rng.choice([6000, 9000, 12000, 18000, 24000, 36000, 48000])
    images = [
        {"url": f"{public_url}/media/images/{quote_sku(sku)}/{n}.png",
         "kind": "hero" if n == 0 else "gallery", "width": 800, "height": 600}
        for n in range(rng.choice([0, 1, 1, 2]))
    ]  # fmt: skip
    record: Record = {
        "sku": sku,
        "srn": srn,
        "brand": rng.choice(BRANDS),
        "category": category,
        "subcategory": rng.choice(SUBCATEGORIES[slug]),
        "series": {"name": rng.choice(SERIES)},
        "family": {"name": rng.choice(FAMILIES)},
        "description": None if rng.random() < 0.1 else f"{slug} unit {sku}",
        "status": "Discontinued" if rng.random() < 0.08 else "Active",
        "specifications": {
            "voltage": rng.choice([115, 208, 230]),
            "dimensions": {"widthIn": rng.randint(10, 60), "heightIn": rng.randint(8, 50)},
            "refrigerant": "R-454B",
        },
        "performance": (
            {
                "coolingCapacityBtuh": capacity,
                "heatingCapacityBtuh": capacity + 2000,
                "seer2": round(rng.uniform(15, 33), 1),
                "hspf2": round(rng.uniform(7.5, 11), 1),
            }
            if slug in ("indoor-units", "outdoor-units")
            else None
        ),
        "compatibility": {"compatibleSkus": []},
        "images": images,
        "updatedAt": at(rng.randrange(SPAN_MS)),
        "_links": {"self": {"href": unit_href(slug, sku)}},
    }
    if rng.random() < 0.05:
        record["x-legacyCode"] = f"L{rng.randrange(10**6):06d}"
    return record


def generate(seed: int, scale: str, public_url: str) -> Dataset:
    """Build the whole dataset."""
    sizes = SCALES[scale]
    rng = random.Random(seed)
    data = Dataset()
    index = 0
    for slug in UNIT_SLUGS:
        count = round(sizes["products"] * TYPE_SHARE[slug])
        records = []
        for _ in range(count):
            index += 1
            sku = make_sku(rng, slug, index)
            records.append(make_unit(rng, slug, sku, f"SRN{index:08d}", public_url))
        data.units[slug] = records
    _link_compatibility(rng, data)
    _make_pairings(rng, data, round(sizes["products"] * 0.5))
    _make_assets(rng, data, sizes["assets"])
    _make_leads(rng, data, sizes["leads"])
    _make_contractors(rng, data)
    return data


def _link_compatibility(rng: random.Random, data: Dataset) -> None:
    outdoor = [u["sku"] for u in data.units["outdoor-units"]]
    for unit in data.units["indoor-units"]:
        unit["compatibility"]["compatibleSkus"] = rng.sample(outdoor, min(3, len(outdoor)))


def pairing_product(position: str, unit: Record, slug: str) -> Record:
    """A product slot of a pairing, linking to the units resolver."""
    return {
        "position": position,
        "sku": unit["sku"],
        "srn": unit["srn"],
        "type": slug,
        "_links": {"self": {"href": f"{UNITS_RESOLVER}/{quote_sku(unit['sku'])}"}},
    }


def _make_pairings(rng: random.Random, data: Dataset, count: int) -> None:
    indoor, outdoor = data.units["indoor-units"], data.units["outdoor-units"]
    ghosts = 0

    def pick(slug: str) -> Record:
        nonlocal ghosts
        if rng.random() < 0.02:  # a product the catalog does not (yet) have
            ghosts += 1
            return {"sku": f"GHOST {ghosts:05d}é", "srn": f"SRN-G{ghosts:07d}"}
        return rng.choice(data.units[slug])

    for n in range(count):
        roll = rng.random()
        if roll < 0.6:
            products = [pairing_product("P1", pick("indoor-units"), "indoor-units"),
                        pairing_product("P2", pick("outdoor-units"), "outdoor-units")]  # fmt: skip
            kind = "Pairing"
        elif roll < 0.85:
            slug = "indoor-units" if rng.random() < 0.6 else "outdoor-units"
            products = [
                pairing_product(
                    "P1", rng.choice(indoor if slug == "indoor-units" else outdoor), slug
                )
            ]
            kind = "Standalone"
        else:
            slugs = rng.sample(UNIT_SLUGS, rng.choice([2, 3]))
            products = [pairing_product(f"P{i + 1}", pick(s), s) for i, s in enumerate(slugs)]
            kind = "Combinations"
        pairing: Record = {
            "relationshipId": 1000 + n * 3,
            "relType": kind,
            "products": products,
            "updatedAt": at(rng.randrange(SPAN_MS)),
        }
        if rng.random() < 0.03:
            pairing["notes"] = "imported"
        data.pairings.append(pairing)
        if kind == "Pairing":
            data.submittals.append(make_submittal(rng, products[0]["srn"], products[1]["srn"]))
        elif kind == "Standalone":
            srn = products[0]["srn"]
            indoor_side = products[0]["type"] == "indoor-units"
            data.submittals.append(
                make_submittal(rng, srn if indoor_side else None, None if indoor_side else srn)
            )


def make_submittal(rng: random.Random, idu: str | None, odu: str | None) -> Record:
    """Submittal data for one (idu, odu)."""
    return {
        "idu": idu,
        "odu": odu,
        "ahriNumber": str(rng.randrange(10**7, 10**8)),
        "documentUrl": f"https://docs.hvac.example/submittals/{idu or '-'}_{odu or '-'}.pdf",
        "systemPerformance": {
            "seer2": round(rng.uniform(14, 30), 1),
            "eer2": round(rng.uniform(9, 15), 1),
        },
        "updatedAt": at(rng.randrange(SPAN_MS)),
    }


def make_asset(rng: random.Random, number: int, skus: list[str], updated_at: str) -> Record:
    """One warehouse digital asset."""
    kind = rng.choice(ASSET_TYPES)
    asset: Record = {
        "assetId": f"DA-{number}",
        "sku": None if rng.random() < 0.05 else rng.choice(skus),
        "assetType": kind,
        "title": f"{kind} {number}",
        "url": f"https://cdn.hvac.example/assets/DA-{number}",
        "mimeType": MIME[kind],
        "language": rng.choice(["en", "en", "es", "fr-CA"]),
        "fileSizeBytes": rng.randrange(10_000, 50_000_000),
        "createdAt": at(rng.randrange(SPAN_MS // 2)),
        "updatedAt": updated_at,
    }
    if rng.random() < 0.02:
        asset["checksum"] = f"{rng.getrandbits(64):016x}"
    return asset


def _make_assets(rng: random.Random, data: Dataset, count: int) -> None:
    skus = [u["sku"] for records in data.units.values() for u in records]
    bulk_instants = [at(rng.randrange(SPAN_MS)) for _ in range(max(4, count // 2000))]
    for number in range(count):
        # Every tenth asset comes from a bulk import: hundreds share one updatedAt.
        stamp = rng.choice(bulk_instants) if number % 10 == 0 else at(rng.randrange(SPAN_MS))
        data.assets.append(make_asset(rng, number, skus, stamp))


def lead_id(rng: random.Random) -> str:
    """A Salesforce-like 18-character id (mixed case: byte order is not letter order)."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "00Q" + "".join(rng.choice(alphabet) for _ in range(15))


def make_lead(rng: random.Random, ident: str, created: str) -> tuple[Record, Record]:
    """A lead list item and its detail, consistent with each other."""
    first, last = rng.choice(["Ana", "Bo", "Chen", "Dée", "Eli"]), rng.choice(["Ng", "Ruiz", "Kå"])
    status = rng.choice(LEAD_STATUSES)
    state = rng.choice(STATES)
    postal = f"{rng.randrange(10000, 99999)}"
    campaign = rng.choice(["Spring25", "HEAR-Rebate", "Winter", None])
    item: Record = {
        "Id": ident, "CreatedDate": created, "LeadID__c": f"L-{rng.randrange(10**8):08d}",
        "Status": status, "LeadSource": rng.choice(LEAD_SOURCES), "Name": f"{first} {last}",
        "Business_Unit__c": rng.choice(BUSINESS_UNITS), "StateCode": state,
        "PostalCode": postal, "Campaign__c": campaign, "marketing_term__c": "heat pump",
        "marketing_medium__c": rng.choice(["cpc", "email", "organic"]),
        "utm_advertising_campaign__c": "brand", "Rooms__c": str(rng.randrange(1, 8)),
        "When_Are_You_Planning_to_Purchase__c": rng.choice(["0-3 months", "3-6 months"]),
        "RecordTypeId": "012000000000001",
    }  # fmt: skip
    if rng.random() < 0.03:
        item["x-score"] = rng.randrange(100)
    detail: Record = {
        "id": ident, "email": f"{first.lower()}.{ident[-6:].lower()}@mail.example",
        "name": item["Name"], "FirstName": first, "LastName": last,
        "company": rng.choice(["", "Acme HVAC", "Home"]),
        "phone": f"+1555{rng.randrange(10**7):07d}",
        "category": rng.choice(["Residential", "Commercial"]), "status": status,
        "purchaseStatus": rng.choice(PURCHASE_STATUSES),
        "address": {"street": f"{rng.randrange(1, 999)} Main St", "city": "Springfield",
                    "state": state, "postalCode": postal, "country": "US"},
        "annualRevenue": rng.choice([0, 125000.5, 2_000_000]),
        "assignedContractor": f"C-{rng.randrange(200):04d}", "assignedBU": item["Business_Unit__c"],
        "doNotSell": rng.random() < 0.1, "approvalCode": f"A{rng.randrange(10**5)}",
        "isApprovedHEAR": rng.random() < 0.3, "isQualifiedHEAR": rng.random() < 0.5,
        "tierHEAR": rng.choice(["1", "2", "3"]), "Consumer_Rebate_Summary__c": "",
        "Contractor_Rebate_Summary__c": "", "Campaign__c": campaign,
        "Auto_Assign_Contractors__c": rng.random() < 0.5, "Rooms__c": item["Rooms__c"],
        "When_Are_You_Planning_to_Purchase__c": item["When_Are_You_Planning_to_Purchase__c"],
        "RecordTypeId": item["RecordTypeId"],
    }  # fmt: skip
    return item, detail


def _make_leads(rng: random.Random, data: Dataset, count: int) -> None:
    # Three bulk imports: each gives thousands of leads one CreatedDate.
    bulk = [at(rng.randrange(SPAN_MS)) for _ in range(3)]
    per_bulk = max(2_100, count // 30)
    seen: set[str] = set()
    for n in range(count):
        created = bulk[n // per_bulk] if n < per_bulk * 3 else at(rng.randrange(SPAN_MS))
        ident = lead_id(rng)
        while ident in seen:
            ident = lead_id(rng)
        seen.add(ident)
        item, detail = make_lead(rng, ident, created)
        data.leads.append(item)
        data.lead_details[ident] = detail


def _make_contractors(rng: random.Random, data: Dataset) -> None:
    for n in range(200):
        reviews = [
            {"reviewId": f"R-{n}-{k}", "rating": rng.randint(1, 5), "text": "Great install",
             "createdAt": at(rng.randrange(SPAN_MS))}
            for k in range(rng.randrange(0, 5))
        ]  # fmt: skip
        data.contractors.append({
            "contractorId": f"C-{n:04d}", "name": f"Contractor {n}", "city": "Springfield",
            "state": rng.choice(STATES), "rating": round(rng.uniform(2.5, 5), 1),
            "reviews": reviews,
        })  # fmt: skip


def image_bytes(sku: str, number: str) -> bytes:
    """Deterministic small bytes of a product image."""
    return b"\x89PNG\r\n\x1a\n" + dumps({"sku": sku, "image": number}) * 8
