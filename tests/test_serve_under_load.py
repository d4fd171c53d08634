"""The read API keeps answering, from one snapshot per answer, while syncs publish new ones.

A real ``ductwork serve`` with two uvicorn workers answers a bounded number of client threads
while three mutate + sync + publish cycles run against a sandbox of its own. Every answer must
be a success, every answer must come from one snapshot (its totals are those of the snapshot its
``X-Snapshot-Version`` names) and carry the ETag of its own body, every list walked page by page
under one snapshot must add up, and a revalidated page answers 304 or its new body.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from xxhash import xxh3_128_hexdigest

from ductwork import snapshots
from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.snapshots import guard
from ductwork.streams.registry import PAIRINGS
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer
from tests.helpers.serve_process import start_serve, stop_serve
from tests.helpers.sync import mutate, sync

ROOT = Path(__file__).parent.parent
CLIENT_THREADS = 4
MAX_REQUESTS = 40_000  # a hard bound, whatever the machine's speed
PAGE = 250
CYCLES = 3


@dataclass
class LoadRecord:
    """What the client threads saw, shared under one lock."""

    latencies_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # (list path, snapshot version) -> every totalItems seen for it
    totals: dict[tuple[str, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    complete_walks: int = 0
    interrupted_walks: int = 0
    not_modified: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> int:
        """Requests answered or failed so far."""
        return len(self.latencies_s) + len(self.failures)

    def fail(self, message: str) -> None:
        """Remember one failed request or inconsistent answer."""
        with self.lock:
            self.failures.append(message)


@pytest.fixture
def load_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, mutated between the syncs."""
    with object_store.sandbox(4242) as handle:
        yield handle


def timed_get(
    client: httpx.Client, record: LoadRecord, url: str, headers: dict[str, str] | None = None
) -> httpx.Response | None:
    """GET ``url``; a transport error or an unexpected status is a failure (returns None)."""
    started = time.perf_counter()
    try:
        answer = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        record.fail(f"{url}: {type(exc).__name__}: {exc}")
        return None
    elapsed = time.perf_counter() - started
    if answer.status_code not in (200, 304):
        record.fail(f"{url}: {answer.status_code} {answer.text[:200]}")
        return None
    with record.lock:
        record.latencies_s.append(elapsed)
        record.not_modified += answer.status_code == 304
    return answer


def check_page(record: LoadRecord, path: str, answer: httpx.Response, page: int) -> dict | None:
    """One list page agrees with itself: page size, totals, and records in order."""
    body = answer.json()
    data = body["data"]
    records = data["pairings"] if isinstance(data, dict) else data
    pagination = body["pagination"] if "pagination" in body else data["pagination"]
    total = pagination["totalItems"]
    expected = max(0, min(PAGE, total - (page - 1) * PAGE))
    version = answer.headers["x-snapshot-version"]
    if answer.headers["etag"].removesuffix('-gzip"').strip('"') != xxh3_128_hexdigest(
        answer.content
    ):
        record.fail(f"{path}: ETag {answer.headers['etag']} is not of the body answered")
    if len(records) != expected or pagination["totalPages"] != math.ceil(total / PAGE):
        record.fail(f"{path} page {page}: {len(records)} records, pagination {pagination}")
        return None
    with record.lock:
        record.totals[(path, version)].add(total)
    return {"version": version, "total": total, "records": records}


def walk_list(
    client: httpx.Client, record: LoadRecord, base: str, path: str, key_of: Callable[[dict], str]
) -> None:
    """Page through a list; if every page came from one snapshot, the pages must add up."""
    versions, keys, page, total = set(), [], 1, None
    while total is None or (page - 1) * PAGE < total:
        answer = timed_get(client, record, f"{base}{path}?count={PAGE}&page={page}")
        if answer is None:
            return
        checked = check_page(record, path, answer, page)
        if checked is None:
            return
        versions.add(checked["version"])
        keys += [key_of(item) for item in checked["records"]]
        total = checked["total"]
        page += 1
    if len(versions) > 1:
        with record.lock:
            record.interrupted_walks += 1  # a publish landed between two pages: allowed
        return
    if len(keys) != total or len(set(keys)) != total:
        record.fail(f"{path} walked under one snapshot: {len(keys)} keys, totalItems {total}")
    with record.lock:
        record.complete_walks += 1


def client_loop(base: str, key: str, record: LoadRecord, stop: threading.Event, n: int) -> None:
    """One client thread: walks the lists, looks up leads, and revalidates by ETag."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(headers=headers, timeout=60) as client:
        turn = 0
        while not stop.is_set() and record.requests < MAX_REQUESTS:
            turn += 1
            choice = (turn + n) % 4
            if choice == 0:
                walk_list(client, record, base, paths.PRODUCTS_LIST, lambda item: item["sku"])
            elif choice == 1:
                walk_list(
                    client,
                    record,
                    base,
                    paths.DATA_WAREHOUSE_DIGITAL_ASSETS,
                    lambda a: a["assetId"],
                )
            elif choice == 2:
                walk_list(client, record, base, PAIRINGS.path, lambda p: p["relationshipId"])
            else:
                leads = timed_get(client, record, f"{base}{paths.LEADS}?count=50")
                if leads is None:
                    continue
                items = leads.json()["data"]
                order = [(item["CreatedDate"], item["Id"]) for item in items]
                if order != sorted(order) or len(items) != 50:
                    record.fail(f"{paths.LEADS}: {len(items)} items, out of order or short")
                timed_get(client, record, f"{base}{paths.LEADS}/{items[0]['Id']}")
                again = timed_get(
                    client,
                    record,
                    f"{base}{paths.LEADS}?count=50",
                    {"If-None-Match": leads.headers["etag"]},
                )
                unchanged = again is not None and again.content == leads.content
                if unchanged and again.status_code == 200:
                    record.fail(f"{paths.LEADS}: the same body again instead of 304")


def snapshot_totals(home: Path, version: str) -> dict[str, int]:
    """The list totals of one published snapshot, read from its file."""
    path = HomeSettings(home=home).snapshots_dir / f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    with guard.open_locked(path) as con:

        def count(table: str) -> int:
            return con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]

        return {
            paths.PRODUCTS_LIST: count("catalog_items"),
            paths.DATA_WAREHOUSE_DIGITAL_ASSETS: count("serving_digital_assets"),
        }


def percentile(sorted_values: list[float], share: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def test_two_workers_answer_every_request_from_one_snapshot_while_three_syncs_publish(
    load_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    home = tmp_path
    sync(home, load_upstream, object_store)
    key = KeyFile(HomeSettings(home=home).keys_path).create("load", ["all"])
    api = start_serve(home, workers=2)
    record, stop = LoadRecord(), threading.Event()
    clients = [
        threading.Thread(target=client_loop, args=(api.url, key, record, stop, n), daemon=True)
        for n in range(CLIENT_THREADS)
    ]
    published: list[str] = []
    started = time.monotonic()
    try:
        for client in clients:
            client.start()
        for cycle in range(CYCLES):
            mutate(load_upstream, assets_added=20 + cycle, leads_added=30, products_changed=5)
            sync(home, load_upstream, object_store)
            current = snapshots.current(HomeSettings(home=home).snapshots_dir)
            assert current is not None
            published.append(current.version)
        # Keep the load on until both workers answer from the last snapshot.
        deadline = time.monotonic() + 60
        final = published[-1]
        while time.monotonic() < deadline and record.requests < MAX_REQUESTS:
            with record.lock:
                seen_final = any(version == final for _, version in record.totals)
            if seen_final:
                break
            time.sleep(0.2)
        stop.set()
        for client in clients:
            client.join(timeout=300)
    finally:
        stop.set()
        stop_serve(api)
    elapsed = time.monotonic() - started

    latencies = sorted(record.latencies_s)
    summary = {
        "requests": record.requests,
        "failed": len(record.failures),
        "seconds": round(elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "p95_ms": round(percentile(latencies, 0.95) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "not_modified": record.not_modified,
        "complete_walks": record.complete_walks,
        "walks_spanning_a_publish": record.interrupted_walks,
        "snapshots_seen": len({version for _, version in record.totals}),
        "workers": 2,
        "client_threads": CLIENT_THREADS,
    }
    print("\nload test:", json.dumps(summary))
    (tmp_path / "load-summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")

    assert record.failures == [], record.failures[:10]
    assert all(not client.is_alive() for client in clients)
    assert record.complete_walks > 0
    seen = {version for _, version in record.totals}
    assert published[-1] in seen, "the last publish was never served"
    assert len(seen) >= 2, "no publish was picked up during the load"
    for (path, version), totals in record.totals.items():
        assert len(totals) == 1, f"{path} under {version} answered totals {totals}"
        expected = snapshot_totals(home, version).get(path)
        if expected is not None:
            assert totals == {expected}, f"{path} under {version}: {totals} != {expected}"
