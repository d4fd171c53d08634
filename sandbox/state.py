"""The sandbox's live state: the records it serves, their indexes, its knobs and counters."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sandbox.catalog_view import CatalogView, build_catalog_view
from sandbox.compact_json import dumps_compact as dumps
from sandbox.dataset import Dataset
from sandbox.fault_settings import Faults
from sandbox.lead_records import LeadMaker
from sandbox.record_tables import AssetTable, LeadBook, LeadList
from sandbox.timeline import LogicalClock

Record = dict[str, Any]
SubmittalKey = tuple[str | None, str | None]

__all__ = ["Faults", "SandboxState", "build_state"]


@dataclass
class SandboxState:
    """Everything the sandbox serves, and how it misbehaves.

    Handlers run on the server's event loop; code on other threads (tests, the mutation
    API) takes ``lock`` before changing records.
    """

    api_key: str
    public_url: str
    seed: int
    units: dict[str, list[Record]]
    pairings: list[Record]
    submittals: dict[SubmittalKey, bytes]
    assets: AssetTable
    leads: LeadList
    lead_maker: LeadMaker
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
    pim_jobs: int = 0
    indoor_model_calls: deque = field(default_factory=deque)
    clock: LogicalClock = field(default_factory=LogicalClock)
    mutations: int = 0
    next_asset: int = 0
    next_lead: int = 0
    lead_overrides: dict[str, tuple[Record, Record]] = field(default_factory=dict)
    deleted_leads: set[str] = field(default_factory=set)
    catalog: CatalogView | None = None

    def rebuild_catalog(self) -> None:
        """Re-index units and pairings (after products changed)."""
        self.catalog = build_catalog_view(self.units, self.pairings)

    def view(self) -> CatalogView:
        """The current catalog indexes."""
        if self.catalog is None:
            self.rebuild_catalog()
        assert self.catalog is not None
        return self.catalog

    def lead(self, lead_id: str) -> tuple[Record, Record] | None:
        """(list item, detail) of a lead, or None if no lead has that id (or it was deleted)."""
        if lead_id in self.deleted_leads:
            return None
        changed = self.lead_overrides.get(lead_id)
        if changed is not None:
            return changed
        number = self.lead_maker.number_of(lead_id)
        if number is None or number >= self.lead_maker.count:
            return None
        item, detail = self.lead_maker.make(number)
        if item["Id"] != lead_id or detail is None:
            return None
        return item, detail

    @property
    def lead_items(self) -> LeadBook:
        """Lead id -> current list item (a read-only mapping)."""
        return LeadBook(self.leads, self.lead)

    def mutate(self, counts: dict[str, int]) -> dict[str, list[str]]:
        """Change the data deterministically (see ``sandbox.mutations``); returns ids by kind."""
        from sandbox.mutations import apply_mutation

        with self.lock:
            return apply_mutation(self, counts)

    def delete_leads(self, lead_ids: list[str]) -> list[str]:
        """Delete these leads, as a CRM user deletes one: it leaves the list and its detail is a
        404 from then on. Unknown ids are passed over; returns the ids deleted."""
        from sandbox.mutations import delete_leads

        with self.lock:
            return delete_leads(self, lead_ids)

    def log_request(
        self, arrived: float, answered: float, path: str, query: str, status: int
    ) -> None:
        """Remember a request: when it arrived, when its answer started (Unix seconds), its
        path, raw query string and status (-1 for a dropped connection)."""
        self.request_log.append((arrived, answered, path, query, status))

    def stats(self) -> dict[str, int]:
        """Record counts and counters, for ``GET /_sandbox/stats``."""
        return {
            "products": sum(len(records) for records in self.units.values()),
            **{slug: len(records) for slug, records in self.units.items()},
            "pairings": len(self.pairings),
            "submittals": len(self.submittals),
            "assets": len(self.assets),
            "leads": len(self.leads.keys),
            "requests": self.requests_seen,
            "mutations": self.mutations,
            "pim_jobs": self.pim_jobs,
        }


def build_state(
    data: Dataset, api_key: str, public_url: str, seed: int, **options: Any
) -> SandboxState:
    """Index a generated dataset for serving; ``options`` are SandboxState knobs."""
    state = SandboxState(
        api_key=api_key,
        public_url=public_url,
        seed=seed,
        units=data.units,
        pairings=data.pairings,
        submittals={(s["idu"], s["odu"]): dumps(s) for s in data.submittals},
        assets=data.assets,
        leads=data.leads,
        lead_maker=data.lead_maker,
        contractors_body=dumps(
            {"success": True, "message": "OK", "data": dumps(data.contractors).decode()}
        ),
        next_asset=len(data.assets),
        next_lead=data.lead_maker.count,
        **options,
    )
    state.rebuild_catalog()
    return state
