"""Streams an upstream cannot poison: date-times in any ISO 8601 form it writes, and lead details
whose answer names the lead differently (or not at all), against a real sandbox."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta, timezone
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.streams import asset_named
from ductwork.contract.encoding import dumps, format_datetime, loads, parse_datetime
from ductwork.contract.paths import LEADS
from ductwork.settings import HomeSettings
from ductwork.streams.registry import DIGITAL_ASSETS
from ductwork.streams.registry import LEADS as LEAD_STREAM
from sandbox.server import Faults, SandboxHandle
from tests.conftest import ObjectStoreServer, resources_for
from tests.helpers.api import both_keys, compare_all, mirror_requests, walk_requests
from tests.helpers.sync import api_over, metadata_by_asset, mutate, sync

CANONICAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
CHANGES = {"leads_added": 150, "leads_changed": 40, "assets_updated": 60, "assets_added": 30}

LEAD_ASSET, ASSET_ASSET = LEAD_STREAM.assets[0], DIGITAL_ASSETS.assets[0]
LEAD_STEPS = [asset_named(name) for name in LEAD_STREAM.assets]


@pytest.fixture
def tiny_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A small sandbox of its own, for tests that change how it answers."""
    with object_store.sandbox(91, "tiny") as handle:
        yield handle


def _bookmarks(home: Path) -> dict[str, dict]:
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        rows = con.execute(
            "SELECT key, value FROM sync_state WHERE key IN (?, ?)",
            [LEAD_ASSET, ASSET_ASSET],
        ).fetchall()
    return {stream: loads(bookmark) for stream, bookmark in rows}


def _newest_upstream_keys(upstream: SandboxHandle) -> tuple[tuple[str, str], tuple[str, str]]:
    """The sandbox's last (CreatedDate, Id) and (updatedAt, assetId), in the contract's form."""
    created, lead_id = upstream.state.leads.keys[-1]
    updated, _, asset_id = upstream.state.assets.keys[-1].partition(" ")
    return (created, lead_id), (updated, asset_id)


def _assert_bookmarks_at_the_newest_and_canonical(home: Path, upstream: SandboxHandle) -> None:
    saved = _bookmarks(home)
    lead, asset = _newest_upstream_keys(upstream)
    assert CANONICAL.match(saved[LEAD_ASSET]["CreatedDate"]), saved
    assert CANONICAL.match(saved[ASSET_ASSET]["updatedAt"]), saved
    assert (saved[LEAD_ASSET]["CreatedDate"], saved[LEAD_ASSET]["Id"]) == lead
    assert (
        saved[ASSET_ASSET]["updatedAt"],
        saved[ASSET_ASSET]["assetId"],
    ) == asset


def _assert_mirror_equals_upstream(home: Path, upstream: SandboxHandle) -> None:
    with api_over(home) as api:
        requests = mirror_requests(upstream) + walk_requests(upstream, 97)
        compare_all(upstream, api, requests, both_keys(upstream, api))


def test_syncs_of_date_times_in_mixed_iso_forms_succeed_with_canonical_bookmarks_and_mirror(
    tiny_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    tiny_upstream.state.faults = Faults(mixed_timestamps=True)
    sync(tmp_path, tiny_upstream, object_store)
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path), read_only=True) as con:
        forms = con.execute(
            "SELECT count(*) FILTER (created_date_text LIKE '%+0000'),"
            " count(*) FILTER (created_date_text LIKE '%-08:00') FROM leads"
        ).fetchall()[0]
        stored = con.execute("SELECT record FROM digital_assets LIMIT 200").fetchall()
    assert min(forms) > 0, "the sandbox should write CreatedDate in several forms"
    assert any("+05:30" in record for (record,) in stored)
    _assert_bookmarks_at_the_newest_and_canonical(tmp_path, tiny_upstream)

    for _ in range(2):  # two more runs, each after the upstream changed
        newest_before = tiny_upstream.state.leads.keys[-1][0]
        changed = mutate(tiny_upstream, **CHANGES)
        after = metadata_by_asset(sync(tmp_path, tiny_upstream, object_store))
        assert after["crm_leads"]["leads_new_or_resumed"] == CHANGES["leads_added"]
        assert after["warehouse_digital_assets"]["rows_upserted"] == (
            CHANGES["assets_updated"] + CHANGES["assets_added"]
        )
        _assert_bookmarks_at_the_newest_and_canonical(tmp_path, tiny_upstream)
        _assert_recent_lead_changes_arrived(tmp_path, tiny_upstream, changed, newest_before)
    with api_over(tmp_path) as api:  # the lead list waits for the reconciliation below
        requests = [req for req in mirror_requests(tiny_upstream) if req[0] != LEADS]
        compare_all(tiny_upstream, api, requests, both_keys(tiny_upstream, api))
    # Changes to older leads, outside the re-read window, arrive by reconciliation; then every
    # list equals the upstream's, in its order, walked with cursors in any of its forms.
    sync(tmp_path, tiny_upstream, object_store, reconcile=True)
    _assert_mirror_equals_upstream(tmp_path, tiny_upstream)


def _assert_recent_lead_changes_arrived(
    home: Path, upstream: SandboxHandle, changed: dict, newest_before: str
) -> None:
    """New leads, and changes to leads inside the re-read window, are stored."""
    window_start = format_datetime(parse_datetime(newest_before) - timedelta(days=30))
    items = upstream.state.lead_items
    recent = [i for i in changed["leads_changed"] if items[i]["CreatedDate"] > window_start]
    assert recent, "the sandbox should change some recent leads"
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        stored = dict(con.execute("SELECT id, record FROM leads").fetchall())
    for lead_id in [*changed["leads_added"], *recent]:
        assert loads(stored[lead_id])["Status"] == items[lead_id]["Status"], lead_id


def test_bookmarks_saved_in_the_upstreams_own_forms_resume_and_are_saved_canonical_again(
    tiny_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    sync(tmp_path, tiny_upstream, object_store)
    saved = _bookmarks(tmp_path)
    lead_at = parse_datetime(saved[LEAD_ASSET]["CreatedDate"])
    asset_at = parse_datetime(saved[ASSET_ASSET]["updatedAt"])
    # Saved in the upstream's own forms: the instants exactly as the upstream wrote them.
    saved[LEAD_ASSET]["CreatedDate"] = lead_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"
    west = timezone(timedelta(hours=-8))
    saved[ASSET_ASSET]["updatedAt"] = asset_at.astimezone(west).isoformat()
    with duckdb.connect(str(HomeSettings(home=tmp_path).warehouse_path)) as con:
        for stream, bookmark in saved.items():
            con.execute(
                "UPDATE sync_state SET value = ? WHERE key = ?",
                [dumps(bookmark).decode(), stream],
            )
    mutate(tiny_upstream, **CHANGES)
    after = metadata_by_asset(sync(tmp_path, tiny_upstream, object_store))
    assert after["crm_leads"]["leads_new_or_resumed"] == CHANGES["leads_added"]
    assert after["warehouse_digital_assets"]["rows_upserted"] == (
        CHANGES["assets_updated"] + CHANGES["assets_added"]
    )
    _assert_bookmarks_at_the_newest_and_canonical(tmp_path, tiny_upstream)
    assert format_datetime(lead_at) < _bookmarks(tmp_path)[LEAD_ASSET]["CreatedDate"]
    _assert_mirror_equals_upstream(tmp_path, tiny_upstream)


def _detail_requests_since(upstream: SandboxHandle, since: float) -> int:
    prefix = LEADS + "/"
    return sum(
        1
        for entry in list(upstream.state.request_log)
        if entry[0] >= since and entry[2].startswith(prefix)
    )


def _lead_and_detail_ids(home: Path) -> tuple[set[str], set[str], list[tuple[str, dict]]]:
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        leads = {row[0] for row in con.execute("SELECT id FROM leads").fetchall()}
        details = con.execute("SELECT id, record FROM lead_details WHERE found").fetchall()
        queued = con.execute("SELECT count(*) FROM lead_detail_queue").fetchall()[0][0]
    assert queued == 0
    return leads, {row[0] for row in details}, [(i, loads(r)) for i, r in details]


def test_lead_details_answered_without_an_id_are_kept_under_the_requested_id_and_not_refetched(
    tiny_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    tiny_upstream.state.faults = Faults(lead_detail_ids="omit_id")
    resources = resources_for(tmp_path, tiny_upstream.url, object_store)
    first = dg.materialize(
        [asset_named("crm_leads"), asset_named("crm_lead_details")], resources=resources
    )
    assert first.success
    leads, details, records = _lead_and_detail_ids(tmp_path)
    assert details == leads and len(leads) == len(tiny_upstream.state.leads.keys)
    assert all("id" not in record for _, record in records)  # stored as received

    started = time.time()
    again = dg.materialize(
        [asset_named("crm_leads"), asset_named("crm_lead_details")], resources=resources
    )
    assert again.success
    assert metadata_by_asset(again)["crm_lead_details"]["requests"] == 0
    assert _detail_requests_since(tiny_upstream, started) == 0


def test_lead_details_answered_with_the_long_form_of_a_short_id_are_kept_under_the_short_id(
    tiny_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    tiny_upstream.state.faults = Faults(lead_detail_ids="case_safe")
    sync(tmp_path, tiny_upstream, object_store)
    leads, details, records = _lead_and_detail_ids(tmp_path)
    assert details == leads and len(leads) == len(tiny_upstream.state.leads.keys)
    assert {len(lead_id) for lead_id in leads} == {15}
    for lead_id, record in records:  # the answer's own id, as received: the 18-character form
        assert len(record["id"]) == 18 and record["id"].startswith(lead_id)

    started = time.time()
    again = metadata_by_asset(sync(tmp_path, tiny_upstream, object_store))
    assert again["crm_lead_details"]["requests"] == 0
    assert _detail_requests_since(tiny_upstream, started) == 0
    with api_over(tmp_path) as api:
        sample = sorted(leads)[:: max(1, len(leads) // 50)]
        requests = walk_requests(tiny_upstream, 500) + [(f"{LEADS}/{i}", {}) for i in sample]
        compare_all(tiny_upstream, api, requests, both_keys(tiny_upstream, api))
