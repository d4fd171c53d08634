"""API replicas that share nothing but the object store (and Redis for the limits).

One publisher (``ductwork sync`` with ``DUCTWORK_SNAPSHOT_STORE``) and two replicas
(``ductwork serve``, two workers each, a data folder of their own that holds a cache only, and
the key file given by ``DUCTWORK_API_KEYS_FILE``), all as operators start them, against moto's
S3 server and a real Redis on loopback.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, S3Settings, ServeSettings, SnapshotStoreSettings
from ductwork.snapshots.store import SnapshotStore
from ductwork.streams.registry import PAIRINGS
from sandbox.local_server import serving
from sandbox.server import SandboxHandle
from serve.app import create_app
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.bursts import burst_over_every_worker, logged_pids
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import RunningApi, serving_process
from tests.helpers.sync import mutate

POLL_S = 1.0
# A new snapshot must be served within the poll interval plus this: the download and the
# load of its indexes, on two cores shared with the load and the publisher.
MARGIN_S = 15.0
CONFIRMATIONS = 10  # consecutive answers, each on a fresh connection, naming the version
LOAD_THREADS_PER_REPLICA = 2
MAX_REQUESTS = 200_000  # a hard bound, whatever the machine's speed
KEY_LIMIT = 40  # per key per second, across every worker of every replica
AGED_S = 4.0  # how old a snapshot grows before the store confirms it again


@dataclass(frozen=True)
class StoreSetup:
    """A snapshot store in a bucket of its own, and the key file every replica mounts."""

    url: str
    keys_file: Path
    key: str

    def replica_settings(self, object_store: ObjectStoreServer) -> dict[str, str]:
        """The variables of a replica (beside its own ``DUCTWORK_HOME``)."""
        return {
            "DUCTWORK_SNAPSHOT_STORE": self.url,
            "DUCTWORK_SNAPSHOT_POLL_S": str(POLL_S),
            "DUCTWORK_S3_ENDPOINT_URL": object_store.endpoint_url,
            "DUCTWORK_API_KEYS_FILE": str(self.keys_file),
        }


@pytest.fixture
def store_setup(tmp_path: Path) -> StoreSetup:
    """A fresh ``s3://`` location (its bucket does not exist yet) and a key file with one key."""
    keys_file = tmp_path / "mounted-secret" / "api-keys.json"
    key = KeyFile(keys_file).create("replica-clients", ["all"])
    return StoreSetup(f"s3://replicas-{uuid.uuid4().hex[:12]}/published/snapshots", keys_file, key)


@pytest.fixture
def replica_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, mutated between the publishes."""
    with object_store.sandbox(5151) as handle:
        yield handle


@dataclass
class LoadRecord:
    """What the client threads saw, per replica, shared under one lock."""

    answered: int = 0
    failures: list[str] = field(default_factory=list)
    versions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lock: threading.Lock = field(default_factory=threading.Lock)


LOAD_PATHS = (
    f"{paths.PRODUCTS_LIST}?count=100&page=1",
    f"{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}?count=100&page=2",
    f"{paths.LEADS}?count=25",
    f"{PAIRINGS.path}?count=50",
)


def load_loop(base: str, key: str, record: LoadRecord, stop: threading.Event) -> None:
    """Ask one replica for snapshot-backed answers until stopped; anything but a 200 carrying
    its snapshot version is a failure."""
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        turn = 0
        while not stop.is_set() and record.answered + len(record.failures) < MAX_REQUESTS:
            path = LOAD_PATHS[turn % len(LOAD_PATHS)]
            turn += 1
            try:
                answer = client.get(f"{base}{path}")
            except httpx.HTTPError as exc:
                with record.lock:
                    record.failures.append(f"{base}{path}: {type(exc).__name__}: {exc}")
                continue
            version = answer.headers.get("x-snapshot-version")
            with record.lock:
                if answer.status_code != 200 or not version:
                    record.failures.append(f"{base}{path}: {answer.status_code} {version!r}")
                else:
                    record.answered += 1
                    record.versions[base].add(version)


def ready_answer(base: str) -> dict:
    """``/readyz`` on a fresh connection (so that any worker of the replica may answer)."""
    answer = httpx.get(f"{base}/readyz", timeout=10, headers={"Connection": "close"})
    return {"status_code": answer.status_code, **answer.json()}


def seconds_until_serving(base: str, version: str, started: float, limit_s: float) -> float:
    """Seconds from ``started`` until ``CONFIRMATIONS`` answers in a row named ``version``;
    fails once ``limit_s`` have passed."""
    in_a_row = 0
    while time.monotonic() - started < limit_s:
        found = ready_answer(base)
        in_a_row = in_a_row + 1 if found.get("snapshot") == version else 0
        if in_a_row >= CONFIRMATIONS:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{base} did not serve {version} within {limit_s:.0f} s")


def published_version(home: Path) -> str:
    """The publisher's current snapshot version."""
    found = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert found is not None
    return found.version


def publish(env: dict[str, str]) -> None:
    """One ``ductwork sync`` of the publisher, as operators run it."""
    done = ductwork("sync", env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_two_replicas_follow_three_publishes_through_the_store_without_a_failed_request(
    replica_upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    store_setup: StoreSetup,
    tmp_path: Path,
) -> None:
    publisher = tmp_path / "publisher"
    env = {
        **sync_env(publisher, replica_upstream, object_store, UPSTREAM_KEY),
        "DUCTWORK_SNAPSHOT_STORE": store_setup.url,
    }
    publish(env)
    homes = [tmp_path / "replica-a", tmp_path / "replica-b"]
    settings = store_setup.replica_settings(object_store)
    record, stop = LoadRecord(), threading.Event()
    lags: list[float] = []
    confirmed_only = 0
    with (
        serving_process(homes[0], workers=2, settings=settings) as first,
        serving_process(homes[1], workers=2, settings=settings) as second,
    ):
        replicas: list[RunningApi] = [first, second]
        # Ready means one worker is: the other may still be loading the snapshot (503).
        version = published_version(publisher)
        for replica in replicas:
            seconds_until_serving(replica.url, version, time.monotonic(), POLL_S + MARGIN_S)
        clients = [
            threading.Thread(
                target=load_loop, args=(replica.url, store_setup.key, record, stop), daemon=True
            )
            for replica in replicas
            for _ in range(LOAD_THREADS_PER_REPLICA)
        ]
        for client in clients:
            client.start()
        try:
            for cycle in range(3):
                before = published_version(publisher)
                changes = cycle != 1  # the second publish changes nothing: confirm-only
                if changes:
                    mutate(replica_upstream, assets_added=10 + cycle, leads_added=20)
                started_wall = time.time()
                publish(env)
                newest = published_version(publisher)
                # A sync that changed nothing confirms the snapshot (the same version); the
                # replicas must follow whatever the publisher made current either way.
                assert newest != before or not changes
                published = time.monotonic()
                for replica in replicas:
                    lags.append(
                        seconds_until_serving(replica.url, newest, published, POLL_S + MARGIN_S)
                    )
                if newest == before:
                    confirmed_only += 1
                    # The confirmation reached the replicas: the age restarts from the publish.
                    for replica in replicas:
                        age = ready_answer(replica.url)["age_seconds"]
                        assert age <= time.time() - started_wall + 1, (cycle, age)
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=120)

    summary = {
        "answered": record.answered,
        "failed": len(record.failures),
        "lags_s": [round(lag, 2) for lag in lags],
        "confirm_only_publishes": confirmed_only,
        "versions_per_replica": {url: len(found) for url, found in record.versions.items()},
    }
    print("\nreplicas:", json.dumps(summary))
    assert record.failures == [], record.failures[:10]
    assert record.answered > 0
    assert all(len(found) >= 3 for found in record.versions.values()), summary
    for home in homes:  # a replica's folder is a cache of snapshots: no warehouse, no instance
        settings_of_home = HomeSettings(home=home)
        assert not settings_of_home.warehouse_path.exists()
        assert not settings_of_home.dagster_home.exists()
        assert snapshots.current(settings_of_home.snapshots_dir).version == newest


def test_a_replica_answers_not_ready_until_the_store_has_a_snapshot_then_loads_it(
    synced_home: Path,
    object_store: ObjectStoreServer,
    store_setup: StoreSetup,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store_settings = SnapshotStoreSettings(snapshot_store=store_setup.url, snapshot_poll_s=POLL_S)
    home = HomeSettings(home=tmp_path / "replica", api_keys_file=store_setup.keys_file)
    s3 = S3Settings(s3_endpoint_url=object_store.endpoint_url)
    monkeypatch.setenv("DUCTWORK_S3_ENDPOINT_URL", object_store.endpoint_url)
    with serving(create_app(home, ServeSettings(), store_settings)) as url:
        waiting = httpx.get(f"{url}/readyz", timeout=10)
        refused = httpx.get(
            f"{url}{paths.PRODUCTS_LIST}",
            headers={"Authorization": f"Bearer {store_setup.key}"},
            timeout=10,
        )
        current = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
        assert current is not None
        store = SnapshotStore.connect(store_setup.url, s3)
        store.publish(current)
        lag = seconds_until_serving(url, current.version, time.monotonic(), POLL_S + MARGIN_S)
        aged = age_reaches(url, lambda age: age >= AGED_S, limit_s=AGED_S + 10)
        confirming = time.time()
        confirmation = store.publish(current)  # nothing changed: the pointer only
        # The store dates the pointer to the second (truncated): once the replica took the
        # confirmation, its age is under a second more than the time since ``confirming``;
        # before, it is over AGED_S more.
        renewed = age_reaches(
            url, lambda age: age < time.time() - confirming + 1.0, limit_s=POLL_S + MARGIN_S
        )

    assert waiting.status_code == 503
    assert refused.status_code == 503
    assert lag <= POLL_S + MARGIN_S
    assert aged and not confirmation.uploaded
    assert renewed, "the replica did not take the store's confirmation"


def age_reaches(url: str, wanted: Callable[[float], bool], limit_s: float) -> bool:
    """Whether ``/readyz`` reports an age that satisfies ``wanted`` within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if wanted(ready_answer(url)["age_seconds"]):
            return True
        time.sleep(0.1)
    return False


def test_a_key_limit_holds_across_two_replicas_of_two_workers(
    synced_home: Path,
    object_store: ObjectStoreServer,
    store_setup: StoreSetup,
    redis_url: str,
    tmp_path: Path,
) -> None:
    current = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
    assert current is not None
    s3 = S3Settings(s3_endpoint_url=object_store.endpoint_url)
    SnapshotStore.connect(store_setup.url, s3).publish(current)
    settings = {
        **store_setup.replica_settings(object_store),
        "DUCTWORK_RATE_LIMIT_URL": redis_url,
        "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": str(KEY_LIMIT),
    }
    # The replicas read the mounted key file on every request: keys added now count at once.
    keys = [KeyFile(store_setup.keys_file).create(f"burst-{n}", ["all"]) for n in range(3)]
    logs = [tmp_path / "replica-a.log", tmp_path / "replica-b.log"]
    with (
        logs[0].open("wb") as log_a,
        logs[1].open("wb") as log_b,
        serving_process(tmp_path / "replica-a", 2, settings, log_a) as first,
        serving_process(tmp_path / "replica-b", 2, settings, log_b) as second,
    ):
        burst = burst_over_every_worker(
            [first.url, second.url],
            logs,
            2,
            keys,
            [f"{paths.PRODUCTS_LIST}?count=1"],
            2 * KEY_LIMIT,
        )
        answered_by = logged_pids(logs, burst.request_ids)
    statuses = Counter(answer.status_code for answer in burst.answers)
    print(f"\nburst: {dict(statuses)} in {burst.elapsed_s:.2f} s")
    # spread over both workers of both replicas
    assert burst.connections == 4 and len(set(answered_by.values())) == 4, answered_by
    assert set(statuses) <= {200, 429}, statuses
    assert KEY_LIMIT <= statuses[200] <= KEY_LIMIT * 1.1, statuses
