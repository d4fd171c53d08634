"""Nothing lost: a sync through a misbehaving upstream (10 % 5xx, 5 % 429 with Retry-After,
dropped connections, truncated and HTML bodies), a key revoked mid-run and schema drift in
unit records, digital assets, leads and lead details still leave a mirror equal to the
upstream (or fail clearly, committing nothing), and a second run with no upstream change
rewrites no table.

The tests share one sandbox (the tiny scale, so the 429s' seconds of Retry-After stay few)
and one data folder, and run in file order: each starts from the state the one before left,
as consecutive scheduled runs do.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.streams import SYNCED_KEYS
from ductwork.contract.encoding import loads, quote_sku
from ductwork.contract.paths import LEADS, UNIT_SLUGS
from ductwork.settings import HomeSettings
from ductwork.upstream.client import RetryRules
from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED
from sandbox.fault_settings import Faults
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer, resources_for
from tests.helpers.api import both_keys, compare_all, mirror_requests
from tests.helpers.sync import api_over, metadata_by_asset, mutate

# Every 429 costs a whole second of Retry-After, so the module runs on the tiny scale (about
# 2,000 lead-detail requests rather than small's 15,000) and can afford the full 5 %.
# `make soak` (DUCTWORK_SOAK=1) repeats the faulty sync over more seeds.
SCALE = "tiny"
SOAK = bool(os.environ.get("DUCTWORK_SOAK"))
FAULT_SEEDS = range(11, 16) if SOAK else range(11, 12)
FAULTY = Faults(
    error_rate=0.10,
    rate_limit_rate=0.05,
    retry_after_s=1,
    drop_rate=0.01,
    truncate_rate=0.02,
    html_rate=0.02,
)
# Every synced stream whose records come from the upstream's JSON reports its drift.
SYNCED_STREAMS = [
    key.path[-1]
    for key in SYNCED_KEYS
    if key.path[-1] != "internal_manuals"  # listed from the object store, not JSON
]
# Columns that say when this run wrote a row or a bookmark, not what the upstream holds.
RUN_TIME_COLUMNS = {"synced_at"}
RUN_TIME_TABLE_COLUMNS = {("sync_state", "updated_at")}


@dataclass
class Mirror:
    """The shared sandbox and data folder."""

    upstream: SandboxHandle
    store: ObjectStoreServer
    home: Path


def run_sync(mirror: Mirror) -> dg.ExecuteInProcessResult:
    """One run of every stream and the publish; the caller checks the outcome.

    A shortcut on purpose (an ephemeral instance in this process): the test is about the
    assets' reads and writes; what runs do on the instance operators use (crashes, signals,
    waiting, the queue) is tested through ``ductwork sync`` processes elsewhere.
    """
    return dg.materialize(
        [*SYNCED_AND_PUBLISHED, *ALL_CHECKS],
        resources=resources_for(mirror.home, mirror.upstream.url, mirror.store),
        raise_on_error=False,
    )


@pytest.fixture(scope="module")
def mirror(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mirror]:
    with object_store.sandbox(505, SCALE) as handle:
        yield Mirror(handle, object_store, tmp_path_factory.mktemp("nothing-lost"))


def ensure_published(mirror: Mirror) -> Path:
    """The snapshots folder, after a clean sync if nothing was published yet (a test run
    alone starts from an empty data folder)."""
    snapshots = HomeSettings(home=mirror.home).snapshots_dir
    if not (snapshots / "CURRENT").exists():
        assert run_sync(mirror).success
    return snapshots


def assert_mirror_equals_upstream(mirror: Mirror) -> None:
    with api_over(mirror.home) as api:
        requests = mirror_requests(mirror.upstream)
        compare_all(mirror.upstream, api, requests, both_keys(mirror.upstream, api))


def table_hashes(database: Path) -> dict[str, str]:
    """A content hash of every table, rows in a fixed order, run-time columns left out."""
    hashes = {}
    with duckdb.connect(str(database), read_only=True) as con:
        tables = [row[0] for row in con.execute("SHOW TABLES").fetchall()]
        for table in tables:
            columns = [
                row[0]
                for row in con.execute(f'DESCRIBE "{table}"').fetchall()
                if row[0] not in RUN_TIME_COLUMNS and (table, row[0]) not in RUN_TIME_TABLE_COLUMNS
            ]
            listed = ", ".join(f'"{c}"' for c in columns)
            rows = con.execute(f'SELECT {listed} FROM "{table}" ORDER BY ALL').fetchall()
            hashes[table] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return hashes


@pytest.mark.parametrize("seed", FAULT_SEEDS)
def test_sync_through_5xx_429_drops_truncated_and_html_bodies_equals_the_upstream(
    mirror: Mirror, seed: int, tmp_path: Path
) -> None:
    if (HomeSettings(home=mirror.home).snapshots_dir / "CURRENT").exists():
        mirror = replace(mirror, home=tmp_path)  # every trial is a first, full sync
    mirror.upstream.state.faults = replace(FAULTY, seed=seed)
    try:
        result = run_sync(mirror)
    finally:
        mirror.upstream.state.faults = Faults()
    assert result.success
    metadata = metadata_by_asset(result)
    assert sum(m.get("malformed_bodies", 0) for m in metadata.values()) > 0
    assert sum(m.get("rate_limited", 0) for m in metadata.values()) > 0
    assert sum(m.get("dropped_connections", 0) for m in metadata.values()) > 0
    assert_mirror_equals_upstream(mirror)


def test_faulty_sync_never_cut_retry_after_short_and_kept_retries_bounded(
    mirror: Mirror,
) -> None:
    log = list(mirror.upstream.state.request_log)
    statuses = {entry[4] for entry in log}
    assert {429, -1}.issubset(statuses) and statuses & {500, 502, 503, 504}, statuses
    by_request: dict[tuple[str, str], list[tuple[float, float, int]]] = defaultdict(list)
    for arrived, answered, path, query, status in log:
        by_request[(path, query)].append((arrived, answered, status))
    waits_checked = 0
    longest_failure_run = 0
    for request, entries in by_request.items():
        run = 0
        for (_, answered, status), following in zip(entries, [*entries[1:], None], strict=True):
            if status == 429 and following is not None:
                waited = following[0] - answered
                assert waited >= FAULTY.retry_after_s, (request, waited)
                waits_checked += 1
            run = run + 1 if status == -1 or status >= 500 else 0
            longest_failure_run = max(longest_failure_run, run)
    assert waits_checked > 0
    # One request is tried at most once plus max_retries times before the client gives up.
    assert longest_failure_run <= RetryRules().max_retries + 1


def test_second_run_without_upstream_change_leaves_every_table_identical(mirror: Mirror) -> None:
    ensure_published(mirror)
    warehouse = HomeSettings(home=mirror.home).warehouse_path
    before = table_hashes(warehouse)
    assert run_sync(mirror).success
    after = table_hashes(warehouse)
    changed = sorted(name for name in before if before[name] != after.get(name))
    assert not changed, changed
    assert set(after) == set(before)


def test_key_revoked_mid_run_fails_at_once_and_the_previous_snapshot_keeps_serving(
    mirror: Mirror,
) -> None:
    snapshots = ensure_published(mirror)
    pointer_before = (snapshots / "CURRENT").read_text()
    state = mirror.upstream.state
    first_logged = len(state.request_log)
    state.faults = Faults(revoke_after=state.requests_seen + 5)  # mid-run: 5 answers, then 401s
    try:
        result = run_sync(mirror)
    finally:
        state.faults = Faults()
    assert not result.success
    failures = [
        str(event.event_specific_data.error.message)
        for event in result.all_events
        if event.is_step_failure
    ]
    assert failures and all("401" in text for text in failures), failures
    assert any("DUCTWORK_UPSTREAM_API_KEY" in text for text in failures)
    for event in result.all_events:
        assert UPSTREAM_KEY not in str(event)
    answered = [status for _, _, _, _, status in list(state.request_log)[first_logged:]]
    assert answered.count(200) == 5
    rejected = [
        (path, query)
        for _, _, path, query, status in list(state.request_log)[first_logged:]
        if status == 401
    ]
    assert rejected
    assert len(rejected) == len(set(rejected)), "a request answered 401 was retried"
    assert (snapshots / "CURRENT").read_text() == pointer_before
    assert_mirror_equals_upstream(mirror)


def stored_rows(mirror: Mirror, sql: str, ids: list[str]) -> list[tuple]:
    """Rows of the warehouse for the given ids (``sql`` takes the id list as its parameter)."""
    warehouse = HomeSettings(home=mirror.home).warehouse_path
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql, [ids]).fetchall()


def assert_drift_reported(
    metadata: dict[str, int], drifted: int, every_record_drifted: bool = False
) -> None:
    """Every drifted record counted as missing and mistyped; unknown members come on top of
    the few the upstream sends anyway (``every_record_drifted``: none other was read)."""
    assert metadata["schema_drift_missing_members"] == drifted
    assert metadata["schema_drift_mistyped_members"] == drifted
    if every_record_drifted:
        assert metadata["schema_drift_unknown_members"] == drifted
    else:
        assert metadata["schema_drift_unknown_members"] >= drifted
    assert metadata["schema_drift_records"] >= drifted


def test_schema_drift_is_stored_and_served_unchanged_with_absent_typed_values_null(
    mirror: Mirror,
) -> None:
    changed = mutate(mirror.upstream, products_drifted=12, assets_drifted=12, leads_drifted=12)
    drifted, assets, leads = (
        changed["products_drifted"], changed["assets_drifted"], changed["leads_drifted"]
    )  # fmt: skip
    assert len(drifted) == len(assets) == len(leads) == 12
    result = run_sync(mirror)
    assert result.success
    metadata = metadata_by_asset(result)
    slugs = [slug.replace("-", "_") for slug in UNIT_SLUGS]
    for kind in ("records", "unknown_members", "missing_members", "mistyped_members"):
        reported = sum(metadata[slug][f"schema_drift_{kind}"] for slug in slugs)
        assert reported == len(drifted), kind
    assert_drift_reported(metadata["warehouse_digital_assets"], len(assets))
    assert_drift_reported(metadata["crm_leads"], len(leads))
    assert_drift_reported(metadata["crm_lead_details"], len(leads), every_record_drifted=True)
    for name in SYNCED_STREAMS:
        assert "schema_drift_records" in metadata[name], name

    rows = stored_rows(
        mirror,
        "SELECT sku, srn, description, record FROM units WHERE list_contains(?, sku)",
        drifted,
    )
    assert len(rows) == len(drifted)
    for _sku, srn, description, record in rows:
        stored = loads(record)
        assert stored["installationNotes"]["drift"] is True  # the unknown member kept
        assert isinstance(stored["srn"], int)  # the changed type kept in the JSON
        assert "description" not in stored
        assert srn is None and description is None  # typed columns NULL, not a failure

    rows = stored_rows(
        mirror,
        "SELECT language, file_size_bytes, record FROM digital_assets "
        "WHERE list_contains(?, asset_id)",
        assets,
    )
    assert len(rows) == len(assets)
    for language, size, record in rows:
        stored = loads(record)
        assert stored["storage"]["drift"] is True
        assert "language" not in stored and isinstance(stored["fileSizeBytes"], str)
        assert language is None and size is None

    rows = stored_rows(
        mirror,
        "SELECT l.lead_source, l.postal_code, l.record, d.phone, d.annual_revenue, d.record "
        "FROM leads AS l JOIN lead_details AS d USING (id) WHERE list_contains(?, id)",
        leads,
    )
    assert len(rows) == len(leads)
    for source, postal, item, phone, revenue, detail in rows:
        stored_item, stored_detail = loads(item), loads(detail)
        assert stored_item["x-drift"]["drift"] is True and stored_detail["x-drift"]["drift"]
        assert "LeadSource" not in stored_item and isinstance(stored_item["PostalCode"], int)
        assert "phone" not in stored_detail and isinstance(stored_detail["annualRevenue"], str)
        assert source is None and postal is None and phone is None and revenue is None

    assert_mirror_equals_upstream(mirror)
    with api_over(mirror.home) as api:
        details = [(f"{LEADS}/{quote_sku(lead_id)}", {}) for lead_id in leads]
        compare_all(mirror.upstream, api, details, both_keys(mirror.upstream, api))
