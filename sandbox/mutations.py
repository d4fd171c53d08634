"""Deterministic changes to the sandbox's data, as a live upstream's data changes.

Every mutation draws from ``random.Random`` seeded by the state's seed and the mutation's
ordinal, so the same sequence of requests changes the same records. New instants come from
the state's logical clock: later than every record before them.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ductwork.contract.encoding import dumps, format_datetime, loads, parse_received_datetime
from ductwork.contract.paths import UNIT_SLUGS
from sandbox.asset_records import asset_key, make_asset
from sandbox.draws import Draws
from sandbox.lead_records import LEAD_STATUSES, PURCHASE_STATUSES
from sandbox.state import SandboxState

Record = dict[str, Any]
KINDS = (
    "assets_deleted",
    "assets_updated",
    "assets_added",
    "leads_changed",
    "leads_added",
    "products_changed",
    "products_drifted",
    "assets_drifted",
    "leads_drifted",
    "leads_deleted",
)
RECENT_LEAD_DAYS = 30
RECENT_LEAD_SHARE = 0.9  # most changes hit leads created lately, as in a real CRM


def validate_counts(counts: object) -> dict[str, int]:
    """The counts of a mutation request; ValueError for unknown kinds or bad numbers."""
    if not isinstance(counts, dict):
        raise ValueError("a mutation is an object of counts")
    unknown = sorted(set(counts) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown mutation kinds: {', '.join(unknown)}")
    for kind, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 1_000_000:
            raise ValueError(f"{kind} must be an integer between 0 and 1000000")
    return counts


def apply_mutation(state: SandboxState, counts: dict[str, int]) -> dict[str, list[str]]:
    """Apply one mutation (the caller holds ``state.lock``); returns the ids touched per kind."""
    validate_counts(counts)
    state.mutations += 1
    rng = random.Random(f"mutation:{state.seed}:{state.mutations}")
    steps: dict[str, Callable[[SandboxState, random.Random, int], list[str]]] = {
        "assets_deleted": _delete_assets,
        "assets_updated": _update_assets,
        "assets_added": _add_assets,
        "leads_changed": _change_leads,
        "leads_added": _add_leads,
        "products_changed": _change_products,
        "products_drifted": _drift_products,
        "assets_drifted": _drift_assets,
        "leads_drifted": _drift_leads,
        "leads_deleted": _delete_random_leads,
    }
    return {kind: steps[kind](state, rng, counts.get(kind, 0)) for kind in KINDS}


def _sample_asset_ids(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    keys = state.assets.keys
    return [keys[i].partition(" ")[2] for i in rng.sample(range(len(keys)), min(n, len(keys)))]


def _delete_assets(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    victims = _sample_asset_ids(state, rng, n)
    state.assets.remove(victims)
    return victims


def _update_assets(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    chosen = _sample_asset_ids(state, rng, n)
    records = [loads(state.assets.body_of(asset_id) or b"{}") for asset_id in chosen]
    state.assets.remove(chosen)
    for record in records:
        record["updatedAt"] = state.clock.tick()
        record["title"] = f"{record['title'].split(' (rev ')[0]} (rev {state.mutations})"
        record["fileSizeBytes"] = rng.randrange(10_000, 50_000_000)
        state.assets.append(asset_key(record["updatedAt"], record["assetId"]), dumps(record))
    return chosen


def _add_assets(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    skus = [unit["sku"] for slug in UNIT_SLUGS for unit in state.units[slug]]
    added = []
    for _ in range(n):
        number = state.next_asset
        state.next_asset += 1
        now = state.clock.tick()
        record = make_asset(Draws(rng.getrandbits(384)), number, skus, now, now)
        state.assets.append(asset_key(now, record["assetId"]), dumps(record))
        added.append(record["assetId"])
    return added


def _change_leads(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    keys = state.leads.keys
    if not keys or n == 0:
        return []
    newest = parse_received_datetime(keys[-1][0])
    since = format_datetime(newest - timedelta(days=RECENT_LEAD_DAYS))
    recent_from = bisect.bisect_left(keys, (since,))
    chosen: dict[str, None] = {}
    for _ in range(n):
        if recent_from < len(keys) and rng.random() < RECENT_LEAD_SHARE:
            chosen[keys[rng.randrange(recent_from, len(keys))][1]] = None
        else:
            chosen[keys[rng.randrange(len(keys))][1]] = None
    for lead_id in chosen:
        found = state.lead(lead_id)
        if found is None:
            continue
        item, detail = dict(found[0]), dict(found[1])
        status = rng.choice([s for s in LEAD_STATUSES if s != item["Status"]])
        item["Status"] = detail["status"] = status
        detail["purchaseStatus"] = rng.choice(PURCHASE_STATUSES)
        detail["assignedContractor"] = f"C-{rng.randrange(300):04d}"
        detail["Auto_Assign_Contractors__c"] = False
        state.lead_overrides[lead_id] = (item, detail)
        index = state.leads.index_of((item["CreatedDate"], lead_id))
        if index is not None:
            state.leads.bodies[index] = dumps(item)
    return list(chosen)


def delete_leads(state: SandboxState, lead_ids: list[str]) -> list[str]:
    """Delete these leads (the caller holds ``state.lock``): they leave the list and their
    details answer 404. Deletions are not announced, as the upstream's are not. Returns the ids
    deleted, in the list's order."""
    deleted = state.leads.remove(lead_ids)
    state.deleted_leads.update(deleted)
    for lead_id in deleted:
        state.lead_overrides.pop(lead_id, None)
    return deleted


def _delete_random_leads(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    keys = state.leads.keys
    if not keys or n == 0:
        return []
    return delete_leads(
        state, [keys[i][1] for i in rng.sample(range(len(keys)), min(n, len(keys)))]
    )


def _add_leads(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    batch: list[tuple[Record, Record]] = []
    created = state.clock.tick()
    for k in range(n):
        if k and rng.random() < 0.7:  # most new leads do not share their CreatedDate
            created = state.clock.tick()
        number = state.next_lead
        state.next_lead += 1
        item, detail = state.lead_maker.make(number, created=created)
        assert detail is not None
        batch.append((item, detail))
    batch.sort(key=lambda pair: (pair[0]["CreatedDate"], pair[0]["Id"]))
    for item, detail in batch:
        state.lead_overrides[item["Id"]] = (item, detail)
        state.leads.append((item["CreatedDate"], item["Id"]), dumps(item))
    return [item["Id"] for item, _ in batch]


def _change_products(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    everything = [unit for slug in UNIT_SLUGS for unit in state.units[slug]]
    chosen = rng.sample(everything, min(n, len(everything)))
    for unit in chosen:
        unit["description"] = f"Revised ({state.mutations}): {unit['sku']}"
        unit["status"] = "Discontinued" if unit["status"] == "Active" else "Active"
        if unit.get("performance"):
            unit["performance"]["seer2"] = round(rng.uniform(15, 33), 1)
        unit["updatedAt"] = state.clock.tick()
    if chosen:
        state.rebuild_catalog()
    return [unit["sku"] for unit in chosen]


def _drift_products(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    """Schema drift, as an upstream release brings it: a new member nobody announced, an
    optional member gone, and a member whose type changed (``srn`` from string to number)."""
    everything = [unit for slug in UNIT_SLUGS for unit in state.units[slug]]
    chosen = rng.sample(everything, min(n, len(everything)))
    for unit in chosen:
        unit["installationNotes"] = {"clearanceInches": rng.randrange(6, 36), "drift": True}
        unit.pop("description", None)
        unit["srn"] = rng.randrange(10**8, 10**9)
        unit["updatedAt"] = state.clock.tick()
    if chosen:
        state.rebuild_catalog()
    return [unit["sku"] for unit in chosen]


def _drift_assets(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    """Schema drift in digital assets: an unknown member, ``language`` gone and
    ``fileSizeBytes`` sent as a string. The asset's ``updatedAt`` moves, as for any change."""
    chosen = _sample_asset_ids(state, rng, n)
    records = [loads(state.assets.body_of(asset_id) or b"{}") for asset_id in chosen]
    state.assets.remove(chosen)
    for record in records:
        record["updatedAt"] = state.clock.tick()
        record["storage"] = {"tier": rng.choice(["hot", "cold"]), "drift": True}
        record.pop("language", None)
        record["fileSizeBytes"] = str(record["fileSizeBytes"])
        state.assets.append(asset_key(record["updatedAt"], record["assetId"]), dumps(record))
    return chosen


def _drift_leads(state: SandboxState, rng: random.Random, n: int) -> list[str]:
    """Schema drift in recent leads, list item and detail alike: an unknown member,
    ``LeadSource`` and ``phone`` gone, ``PostalCode`` and ``annualRevenue`` of another type.

    Only leads created in the last ``RECENT_LEAD_DAYS // 2`` days drift, well inside the window
    an incremental sync re-reads, so the next run sees every drifted lead."""
    keys = state.leads.keys
    if not keys or n == 0:
        return []
    newest = parse_received_datetime(keys[-1][0])
    since = format_datetime(newest - timedelta(days=RECENT_LEAD_DAYS // 2))
    recent = keys[bisect.bisect_right(keys, (since, "\uffff")) :]
    chosen = [lead_id for _, lead_id in rng.sample(recent, min(n, len(recent)))]
    for lead_id in chosen:
        found = state.lead(lead_id)
        if found is None:
            continue
        item, detail = dict(found[0]), dict(found[1])
        item["x-drift"] = detail["x-drift"] = {"release": state.mutations, "drift": True}
        item.pop("LeadSource", None)
        detail.pop("phone", None)
        item["PostalCode"] = int(item["PostalCode"])
        detail["annualRevenue"] = str(detail["annualRevenue"])
        state.lead_overrides[lead_id] = (item, detail)
        index = state.leads.index_of((item["CreatedDate"], lead_id))
        if index is not None:
            state.leads.bodies[index] = dumps(item)
    return chosen
