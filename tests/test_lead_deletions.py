"""A lead deleted upstream leaves the mirror, on the path users run: ``ductwork sync`` as a
process against the sandbox, then the read API over the data folder. The upstream announces no
deletion; the mirror learns of one in three ways, each tested here with a lead deleted through
the sandbox's ``POST /_sandbox/delete``:

- the re-read of the recent window, for a lead created inside it;
- a full listing (``--full-refresh leads``, ``--reconcile``), for any lead;
- a 404 on the details of a lead queued for them.

A listing cut short (a walk refused midway) takes no lead for deleted; leads deleted at random
by the sandbox's ``leads_deleted`` mutation all leave on a reconciliation.

Each time the served lead list equals the upstream's (every page after the deleted lead in its
place, ``createdAfter`` windows and ``fields`` projections alike), the lead's detail is a 404 as
upstream, the changes feed carries a ``delete`` for it, and the lead history keeps its versions
with none current.

The tests share one sandbox (tiny: 2,000 leads sharing one CreatedDate, from a bulk import) and
one data folder: synced, then given newer leads and synced again, so that the window re-read
covers the newer leads and not the bulk import.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import httpx
import pytest

from ductwork.contract.encoding import format_datetime, parse_received_datetime, quote_sku
from ductwork.contract.paths import LEADS
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from sandbox.fault_settings import Faults
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import both_keys, compare_all, walk_requests
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.feed import walk_feed
from tests.helpers.sync import api_over, delete_upstream, listed_leads, mutate

# Each test runs two or three syncs of the lead steps; the module's fixture two more.
pytestmark = pytest.mark.timeout(900)

SEED = 53  # its bulk import lies more than a year before its newest leads
NEWER_LEADS = 40
LEAD_STEPS = ("--select", "crm_leads", "--select", "crm_lead_details")
WINDOW_DAYS = 30  # DUCTWORK_LEAD_WINDOW_DAYS's default


@dataclass(frozen=True)
class Mirrored:
    """The shared sandbox, the data folder that mirrors it, the sync's environment and a
    read-API key."""

    upstream: SandboxHandle
    home: Path
    env: dict[str, str]
    key: str


def synced(mirrored: Mirrored, *args: str) -> None:
    """``ductwork sync ARGS`` as a process; it must succeed."""
    done = ductwork("sync", *args, env=mirrored.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def mirrored(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mirrored]:
    home = tmp_path_factory.mktemp("lead-deletions")
    with object_store.sandbox(SEED, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        key = KeyFile(HomeSettings(home=home).keys_path).create("deletions", ["all"])
        mirrored = Mirrored(upstream, home, env, key)
        synced(mirrored, *LEAD_STEPS)
        mutate(upstream, leads_added=NEWER_LEADS)
        synced(mirrored, *LEAD_STEPS)  # the cursor is now at the newest lead
        yield mirrored


def upstream_leads(upstream: SandboxHandle) -> list[dict]:
    """The upstream's whole lead list, in its order."""
    return listed_leads(upstream.url, upstream.api_key)


def inside_window(leads: list[dict], lead: dict) -> bool:
    """Whether ``lead`` lies inside the window the next incremental run re-reads (the cursor
    being at the newest lead)."""
    newest = parse_received_datetime(leads[-1]["CreatedDate"])
    return parse_received_datetime(lead["CreatedDate"]) > newest - timedelta(days=WINDOW_DAYS)


def caught_up_token(mirrored: Mirrored) -> str:
    """A feed token naming the data folder's current snapshot."""
    with api_over(mirrored.home, mirrored.key) as api:
        return walk_feed(api.url, mirrored.key, "leads", None, limit=10_000)[1]


def served_lead_ids(mirrored: Mirrored) -> list[str]:
    """The ids of the served lead list, in its order."""
    with api_over(mirrored.home, mirrored.key) as api:
        return [lead["Id"] for lead in listed_leads(api.url, mirrored.key, fields="Status")]


def assert_left_as_upstream(mirrored: Mirrored, deleted: dict, token: str) -> None:
    """The served lead list equals the upstream's, page for page (at 1,000 and at 50 a page,
    from just before the deleted lead's CreatedDate, and projected); the deleted lead's detail
    is the upstream's 404; the feed from ``token`` holds one ``delete`` for it; the warehouse
    holds it no more, and its lead history has no current version."""
    upstream, lead_id = mirrored.upstream, deleted["Id"]
    before = format_datetime(parse_received_datetime(deleted["CreatedDate"]) - timedelta(seconds=1))
    requests = [
        *walk_requests(upstream, 1000),
        *walk_requests(upstream, 50),
        *walk_requests(upstream, 50, createdAfter=before),
        *walk_requests(upstream, 1000, fields="Status,LeadSource"),
        (LEADS, {"createdAfter": before, "count": 10}),
        (f"{LEADS}/{quote_sku(lead_id)}", {}),
    ]
    with api_over(mirrored.home, mirrored.key) as api:
        compare_all(upstream, api, requests, both_keys(upstream, api))
        detail = httpx.get(
            f"{api.url}{LEADS}/{quote_sku(lead_id)}",
            headers={"Authorization": f"Bearer {mirrored.key}"},
            timeout=60,
        )
        changes, _ = walk_feed(api.url, mirrored.key, "leads", token, limit=10_000)
    assert detail.status_code == 404
    mine = [(change["op"], change["record"]) for change in changes if change["key"] == lead_id]
    assert mine == [("delete", None)]
    assert lead_id not in served_lead_ids(mirrored)
    assert lead_id not in stored_lead_ids(mirrored.home)
    warehouse = str(HomeSettings(home=mirrored.home).warehouse_path)
    with duckdb.connect(warehouse, read_only=True) as con:
        versions = con.execute(
            "SELECT is_current, valid_to FROM lead_history WHERE id = ?", [lead_id]
        ).fetchall()
    assert versions  # its history is kept, every version closed: it has no current one
    assert all(not current and ended is not None for current, ended in versions)


def test_a_lead_deleted_inside_the_recent_window_leaves_the_mirror_on_the_next_incremental_sync(
    mirrored: Mirrored,
) -> None:
    leads = upstream_leads(mirrored.upstream)
    deleted = leads[-NEWER_LEADS // 2]  # a newer lead, with newer ones after it
    assert inside_window(leads, deleted)
    token = caught_up_token(mirrored)
    delete_upstream(mirrored.upstream, deleted["Id"])

    synced(mirrored, *LEAD_STEPS)

    assert_left_as_upstream(mirrored, deleted, token)


@pytest.mark.parametrize(
    ("position", "full_listing"),
    [(100, ("--full-refresh", "leads")), (700, ("--reconcile", *LEAD_STEPS))],
    ids=["full-refresh", "reconcile"],
)
def test_a_lead_deleted_before_the_recent_window_leaves_the_mirror_on_a_full_listing(
    mirrored: Mirrored, position: int, full_listing: tuple[str, ...]
) -> None:
    leads = upstream_leads(mirrored.upstream)
    deleted = leads[position]  # from the bulk import: hundreds of leads after it share its date
    assert not inside_window(leads, deleted)
    token = caught_up_token(mirrored)
    delete_upstream(mirrored.upstream, deleted["Id"])

    synced(mirrored, *LEAD_STEPS)  # the window does not reach it: still served
    assert deleted["Id"] in served_lead_ids(mirrored)
    synced(mirrored, *full_listing)

    assert_left_as_upstream(mirrored, deleted, token)


def test_a_404_on_the_details_of_a_queued_lead_takes_it_off_the_served_list(
    mirrored: Mirrored,
) -> None:
    token = caught_up_token(mirrored)
    changed = mutate(mirrored.upstream, leads_changed=5)["leads_changed"]
    synced(mirrored, "--select", "crm_leads")  # lists the changed leads, queues their details
    deleted = next(lead for lead in upstream_leads(mirrored.upstream) if lead["Id"] == changed[0])
    delete_upstream(mirrored.upstream, deleted["Id"])

    synced(mirrored, "--select", "crm_lead_details")  # no listing: only the 404 tells

    assert_left_as_upstream(mirrored, deleted, token)


def stored_lead_ids(home: Path) -> set[str]:
    """The ids in the warehouse's lead list."""
    warehouse = str(HomeSettings(home=home).warehouse_path)
    with duckdb.connect(warehouse, read_only=True) as con:
        return {row[0] for row in con.execute("SELECT id FROM leads").fetchall()}


def test_a_full_listing_cut_short_takes_no_lead_for_deleted(mirrored: Mirrored) -> None:
    leads = upstream_leads(mirrored.upstream)
    deleted = leads[1500]  # past the first page, the only one the refused walk lists
    token = caught_up_token(mirrored)
    delete_upstream(mirrored.upstream, deleted["Id"])
    stored = stored_lead_ids(mirrored.home)
    # The second page answers the first again.
    mirrored.upstream.state.faults = Faults(loop_cursor=True)
    try:
        refused = ductwork("sync", "--full-refresh", "leads", env=mirrored.env)
    finally:
        mirrored.upstream.state.faults = Faults()
    assert refused.returncode == 1
    assert "the cursor does not move forward" in refused.stdout + refused.stderr

    assert stored_lead_ids(mirrored.home) == stored  # the deleted lead and every unlisted one

    synced(mirrored, "--full-refresh", "leads")
    assert_left_as_upstream(mirrored, deleted, token)


def test_leads_deleted_at_random_by_the_sandboxs_mutation_all_leave_the_mirror_on_a_reconciliation(
    mirrored: Mirrored,
) -> None:
    token = caught_up_token(mirrored)
    before = {lead["Id"]: lead for lead in upstream_leads(mirrored.upstream)}
    deleted = mutate(mirrored.upstream, leads_deleted=3)["leads_deleted"]
    assert len(set(deleted)) == 3
    assert len(upstream_leads(mirrored.upstream)) == len(before) - 3

    synced(mirrored, "--reconcile", *LEAD_STEPS)

    for lead_id in deleted:
        assert_left_as_upstream(mirrored, before[lead_id], token)
