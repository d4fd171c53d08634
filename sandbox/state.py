"""The sandbox's live data: records kept as ready JSON bytes, ordered as the contract says,
with the indexes its answers need, and deterministic mutations."""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ductwork.contract.encoding import dumps, format_datetime, loads
from ductwork.contract.paths import UNIT_SLUGS
from sandbox.dataset import EPOCH, SPAN_MS, Dataset, at, lead_id, make_asset, make_lead

Record = dict[str, Any]


@dataclass
class SortedRecords:
    """Records sorted by a key tuple, with the JSON bytes of each."""

    keys: list[tuple[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)

    def insert(self, key: tuple[str, str], body: bytes) -> None:
        at_index = bisect.bisect_left(self.keys, key)
        self.keys.insert(at_index, key)
        self.bodies.insert(at_index, body)

    def remove(self, key: tuple[str, str]) -> None:
        at_index = bisect.bisect_left(self.keys, key)
        if at_index < len(self.keys) and self.keys[at_index] == key:
            del self.keys[at_index]
            del self.bodies[at_index]

    def first_after(self, key: tuple[str, str]) -> int:
        """Index of the first record whose key is strictly greater."""
        return bisect.bisect_right(self.keys, key)


@dataclass
class Faults:
    """Injected misbehaviour (never applied to the admin paths)."""

    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_s: int = 1
    drop_rate: float = 0.0
    latency_ms: float = 0.0
    mutate_every: int = 0  # mutate the data every N requests (0: never)
    mutation: dict[str, int] = field(default_factory=dict)
    seed: int = 0


@dataclass
class SandboxState:
    """Everything the sandbox serves, and how it misbehaves."""

    api_key: str
    public_url: str
    seed: int
    units: dict[str, list[Record]]
    pairings: list[Record]
    submittals: dict[tuple[str | None, str | None], bytes]
    assets: SortedRecords
    asset_keys: dict[str, tuple[str, str]]
    leads: SortedRecords
    lead_items: dict[str, Record]
    lead_details: dict[str, Record]
    contractors_body: bytes
    s3_endpoint_url: str | None = None
    s3_bucket: str | None = None
    indoor_models_per_second: int = 5
    pim_cooldown_s: float = 30.0
    faults: Faults = field(default_factory=Faults)
    lock: threading.RLock = field(default_factory=threading.RLock)
    request_log: deque = field(default_factory=lambda: deque(maxlen=200_000))
    requests_seen: int = 0
    last_pim_start: float | None = None
    indoor_model_calls: deque = field(default_factory=deque)
    clock_ms: int = SPAN_MS
    mutations: int = 0
    next_asset: int = 0
    catalog: dict[str, Any] = field(default_factory=dict)

    # ---- catalog views (rebuilt after product changes) ----
    def rebuild_catalog(self) -> None:
        """Sorted unit lists with filter keys, catalog items, resolver and pairing indexes."""
        typed: dict[str, list[tuple[str, tuple[str, str, str], bytes]]] = {}
        items: list[tuple[str, str, bytes]] = []
        by_sku: dict[tuple[str, str], bytes] = {}
        resolver: dict[str, bytes] = {}
        for slug in UNIT_SLUGS:
            rows = []
            for unit in sorted(self.units[slug], key=lambda u: u["sku"]):
                body = dumps(unit)
                filters = (unit["series"]["name"].lower(), unit["family"]["name"].lower(),
                           unit["brand"].lower())  # fmt: skip
                rows.append((unit["sku"], filters, body))
                by_sku[(slug, unit["sku"])] = body
                resolver.setdefault(unit["sku"], body)
                item = {"sku": unit["sku"], "srn": unit["srn"], "type": slug,
                        "_links": unit["_links"]}  # fmt: skip
                items.append((unit["sku"], slug, dumps(item)))
            typed[slug] = rows
        items.sort(key=lambda row: row[0])
        pairings = sorted(self.pairings, key=lambda p: p["relationshipId"])
        self.catalog = {
            "typed": typed,
            "items": items,
            "by_sku": by_sku,
            "resolver": resolver,
            "pairings": [(p, dumps(p)) for p in pairings],
            "pairing_by_id": {p["relationshipId"]: dumps(p) for p in pairings},
        }

    # ---- time ----
    def tick(self) -> str:
        """A date-time strictly later than any before (logical clock, never backwards)."""
        now_ms = int((datetime.now(UTC) - EPOCH) / timedelta(milliseconds=1))
        self.clock_ms = max(self.clock_ms + 1, now_ms)
        return at(self.clock_ms)

    # ---- mutations ----
    def mutate(self, counts: dict[str, int]) -> dict[str, list[str]]:
        """Change data deterministically; returns the ids touched per kind."""
        with self.lock:
            self.mutations += 1
            rng = random.Random(self.seed * 1_000_003 + self.mutations)
            changed: dict[str, list[str]] = {}
            changed["assets_deleted"] = self._delete_assets(rng, counts.get("assets_deleted", 0))
            changed["assets_updated"] = self._update_assets(rng, counts.get("assets_updated", 0))
            changed["assets_added"] = self._add_assets(rng, counts.get("assets_added", 0))
            changed["leads_changed"] = self._change_leads(rng, counts.get("leads_changed", 0))
            changed["leads_added"] = self._add_leads(rng, counts.get("leads_added", 0))
            changed["products_changed"] = self._change_products(
                rng, counts.get("products_changed", 0)
            )
            return changed

    def _delete_assets(self, rng: random.Random, n: int) -> list[str]:
        victims = rng.sample(sorted(self.asset_keys), min(n, len(self.asset_keys)))
        for asset_id in victims:
            self.assets.remove(self.asset_keys.pop(asset_id))
        return victims

    def _update_assets(self, rng: random.Random, n: int) -> list[str]:
        chosen = rng.sample(sorted(self.asset_keys), min(n, len(self.asset_keys)))
        for asset_id in chosen:
            key = self.asset_keys[asset_id]
            index = bisect.bisect_left(self.assets.keys, key)
            record = loads(self.assets.bodies[index])
            self.assets.remove(key)
            record["updatedAt"] = self.tick()
            record["title"] = f"{record['title']} (rev {self.mutations})"
            new_key = (record["updatedAt"], asset_id)
            self.assets.insert(new_key, dumps(record))
            self.asset_keys[asset_id] = new_key
        return chosen

    def _add_assets(self, rng: random.Random, n: int) -> list[str]:
        skus = [u["sku"] for records in self.units.values() for u in records]
        added = []
        for _ in range(n):
            number = self.next_asset
            self.next_asset += 1
            record = make_asset(rng, number, skus, self.tick())
            key = (record["updatedAt"], record["assetId"])
            self.assets.insert(key, dumps(record))
            self.asset_keys[record["assetId"]] = key
            added.append(record["assetId"])
        return added

    def _change_leads(self, rng: random.Random, n: int) -> list[str]:
        newest = self.leads.keys[-1][0] if self.leads.keys else at(0)
        recent_from = format_datetime(
            datetime.fromisoformat(newest.replace("Z", "+00:00")) - timedelta(days=30)
        )
        start = bisect.bisect_left(self.leads.keys, (recent_from, ""))
        recent = [key[1] for key in self.leads.keys[start:]]
        pool = sorted(self.lead_items)
        chosen = []
        for _ in range(n):
            use_recent = recent and rng.random() < 0.9
            chosen.append(rng.choice(recent) if use_recent else rng.choice(pool))
        for ident in dict.fromkeys(chosen):
            item, detail = self.lead_items[ident], self.lead_details[ident]
            status = rng.choice(["Working", "Qualified", "Converted", "Closed - Lost"])
            item["Status"] = detail["status"] = status
            detail["purchaseStatus"] = rng.choice(["Quoted", "Purchased", "Not Purchased"])
            detail["assignedContractor"] = f"C-{rng.randrange(200):04d}"
            key = (item["CreatedDate"], ident)
            index = bisect.bisect_left(self.leads.keys, key)
            self.leads.bodies[index] = dumps(item)
        return list(dict.fromkeys(chosen))

    def _add_leads(self, rng: random.Random, n: int) -> list[str]:
        created = self.tick()
        added = []
        for number in range(n):
            if number and rng.random() < 0.7:  # several new leads share one CreatedDate
                created = self.tick()
            ident = lead_id(rng)
            while ident in self.lead_items:
                ident = lead_id(rng)
            item, detail = make_lead(rng, ident, created)
            self.lead_items[ident], self.lead_details[ident] = item, detail
            self.leads.insert((created, ident), dumps(item))
            added.append(ident)
        return added

    def _change_products(self, rng: random.Random, n: int) -> list[str]:
        everything = [(slug, u) for slug in UNIT_SLUGS for u in self.units[slug]]
        chosen = rng.sample(everything, min(n, len(everything)))
        for _, unit in chosen:
            unit["description"] = f"Revised {self.mutations}: {unit['sku']}"
            unit["status"] = rng.choice(["Active", "Discontinued"])
            unit["updatedAt"] = self.tick()
        if chosen:
            self.rebuild_catalog()
        return [unit["sku"] for _, unit in chosen]

    def log_request(self, path: str, status: int) -> None:
        """Remember a request (time, path, status) for tests to read back."""
        self.request_log.append((time.time(), path, status))


def build_state(
    data: Dataset, api_key: str, public_url: str, seed: int, **options: Any
) -> SandboxState:
    """Index a generated dataset for serving."""
    assets = SortedRecords()
    asset_rows = sorted(((a["updatedAt"], a["assetId"]), a) for a in data.assets)
    assets.keys = [key for key, _ in asset_rows]
    assets.bodies = [dumps(record) for _, record in asset_rows]
    leads = SortedRecords()
    lead_rows = sorted(((lead["CreatedDate"], lead["Id"]), lead) for lead in data.leads)
    leads.keys = [key for key, _ in lead_rows]
    leads.bodies = [dumps(record) for _, record in lead_rows]
    submittals = {(s["idu"], s["odu"]): dumps(s) for s in data.submittals}
    state = SandboxState(
        api_key=api_key,
        public_url=public_url,
        seed=seed,
        units=data.units,
        pairings=data.pairings,
        submittals=submittals,
        assets=assets,
        asset_keys={key[1]: key for key in assets.keys},
        leads=leads,
        lead_items={lead["Id"]: lead for lead in data.leads},
        lead_details=data.lead_details,
        contractors_body=dumps(
            {"success": True, "message": "OK", "data": dumps(data.contractors).decode()}
        ),
        next_asset=len(data.assets),
        **options,
    )
    state.rebuild_catalog()
    return state
