"""A bucket, or a data folder, that is not to be trusted.

Whoever can write the snapshot prefix (or the data folder's ``snapshots/``) can publish a
file whose ``catalog_items`` is a view over ``read_text('/proc/self/environ')``, with a
matching checksum beside it, and point ``CURRENT`` at it. Such a snapshot, or one whose bytes
are not its publisher's, is never served: the replica keeps its last good snapshot and says
why in ``/readyz``; a server that starts on one answers 503 and says why. All of it through
``ductwork sync`` and ``ductwork serve`` as operators start them, against moto's S3 server.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import httpx

from ductwork import snapshots
from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.snapshots import guard
from ductwork.snapshots.store import StoreLocation
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer, home_with_published_snapshot
from tests.helpers.bursts import logged_pids
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import RunningApi, serving_process, start_serve, stop_serve
from tests.helpers.sync import mutate

POLL_S = 1.0
WORKERS = 2
WAIT_S = 60.0  # a poll, a download and a load, on two shared cores
# In the server's environment: an answer that carries it has read the process's environment.
CANARY = f"canary-{uuid.uuid4().hex}"
ENVIRONMENT_VIEW = """
ALTER TABLE catalog_items RENAME TO catalog_items_kept;
CREATE VIEW catalog_items AS
SELECT sku, unit_type, href, srn, to_json({'environment': e.content}) AS record, synced_at
FROM catalog_items_kept, read_text('/proc/self/environ') AS e;
"""


def hostile_copy(genuine: Path, target: Path, statements: str = ENVIRONMENT_VIEW) -> Path:
    """A copy of a genuine snapshot altered by ``statements`` (by default: the catalog list
    reads the serving process's environment), with its own, correct checksum beside it."""
    shutil.copyfile(genuine, target)
    with duckdb.connect(str(target)) as con:
        con.execute(statements)
    guard.write_checksum(target)
    return target


def ready(url: str, request_id: str | None = None) -> dict:
    """``/readyz``'s status and body, on a fresh connection (under ``request_id`` if given)."""
    headers = {"Connection": "close", **({"X-Request-ID": request_id} if request_id else {})}
    answer = httpx.get(f"{url}/readyz", timeout=10, headers=headers)
    return {"status_code": answer.status_code, **answer.json()}


def until_ready_says(url: str, wanted: str, key: str) -> dict:
    """``/readyz`` once its ``key`` contains ``wanted``; fails after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = ready(url)
        if wanted in str(found.get(key, "")):
            return found
        time.sleep(0.1)
    raise AssertionError(f"/readyz never said {wanted!r} in {key!r}: {ready(url)}")


def until_every_worker_serves(api: RunningApi, access_log: Path, version: str) -> dict[int, dict]:
    """Each worker's latest ``/readyz`` answer, once every worker's finds ``version`` served.

    The server is ready when its first worker is; the other may still be loading. Which worker
    answered a fresh connection is the kernel's choice: the access log names its pid. Asks
    until ``WORKERS`` pids of the server's own process group have answered, the latest answer
    of each finding ``version``; fails after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    latest: dict[int, dict] = {}
    while True:
        request_id = f"ready-{uuid.uuid4().hex}"
        found = ready(api.url, request_id)
        pid = logged_pids([access_log], {request_id}).get(request_id)
        assert pid is not None, f"{request_id} is not in the access log"
        assert os.getpgid(pid) == api.process.pid, f"pid {pid} is not one of the server's"
        latest[pid] = found
        assert len(latest) <= WORKERS, latest
        if len(latest) == WORKERS and all(a.get("snapshot") == version for a in latest.values()):
            return latest
        assert time.monotonic() < deadline, f"not every worker served {version}: {latest}"
        time.sleep(0.05)  # polls; times nothing


def point_at(client: Any, location: StoreLocation, name: str) -> None:
    """Rewrite the store's pointer to name ``name``, as anyone with write access could."""
    client.put_object(
        Bucket=location.bucket, Key=location.key(snapshots.POINTER), Body=name.encode()
    )


def products_page(url: str, key: str) -> httpx.Response:
    """The first page of the product list."""
    return httpx.get(
        f"{url}{paths.PRODUCTS_LIST}?count=100&page=1",
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_a_replica_serves_its_last_good_snapshot_while_the_store_names_a_hostile_one(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    location = StoreLocation.parse(f"s3://hostile-{uuid.uuid4().hex[:12]}/snapshots")
    keys_file = tmp_path / "keys" / "api-keys.json"
    key = KeyFile(keys_file).create("clients", ["all"])
    replica_settings = {
        "DUCTWORK_SNAPSHOT_STORE": str(location),
        "DUCTWORK_SNAPSHOT_POLL_S": str(POLL_S),
        "DUCTWORK_S3_ENDPOINT_URL": object_store.endpoint_url,
        "DUCTWORK_API_KEYS_FILE": str(keys_file),
        "CANARY_SECRET": CANARY,
    }
    client = object_store.resource().client()
    with object_store.sandbox(4404) as upstream:
        publisher = tmp_path / "publisher"
        env = {
            **sync_env(publisher, upstream, object_store, UPSTREAM_KEY),
            "DUCTWORK_SNAPSHOT_STORE": str(location),
        }
        first = ductwork("sync", env=env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        good = snapshots.current(HomeSettings(home=publisher).snapshots_dir)
        assert good is not None
        access_log = tmp_path / "access.log"
        with (
            access_log.open("wb") as log,
            serving_process(
                tmp_path / "replica", WORKERS, settings=replica_settings, stdout=log
            ) as api,
        ):
            until_every_worker_serves(api, access_log, good.version)

            # Someone with write access to the prefix: a file, its checksum, the pointer.
            attack = tmp_path / f"{snapshots.PREFIX}{snapshots.new_version()}{snapshots.SUFFIX}"
            hostile_copy(good.path, attack)
            for path in (attack, guard.checksum_path(attack)):
                client.upload_file(str(path), location.bucket, location.key(path.name))
            point_at(client, location, attack.name)
            refused = until_ready_says(api.url, snapshots.version_of(attack.name), "refused")
            page = products_page(api.url, key)

            # Bytes that are not the publisher's: a checksum written for other content.
            tampered = tmp_path / f"{snapshots.PREFIX}{snapshots.new_version()}{snapshots.SUFFIX}"
            shutil.copyfile(good.path, tampered)
            client.upload_file(str(tampered), location.bucket, location.key(tampered.name))
            client.put_object(
                Bucket=location.bucket,
                Key=location.key(tampered.name + guard.CHECKSUM_SUFFIX),
                Body=(guard.checksum_of(attack) + "\n").encode(),
            )
            point_at(client, location, tampered.name)
            mismatch = until_ready_says(api.url, snapshots.version_of(tampered.name), "refused")
            page_meanwhile = products_page(api.url, key)
            replica_folder = HomeSettings(home=tmp_path / "replica").snapshots_dir
            tampered_kept = (replica_folder / tampered.name).exists()

            # The publisher's next sync is served again, and the refusal is over.
            mutate(upstream, assets_added=5, leads_added=5)
            second = ductwork("sync", env=env)
            assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
            newest = snapshots.current(HomeSettings(home=publisher).snapshots_dir)
            assert newest is not None and newest.version != good.version
            # Each worker follows the store on its own: both must have moved on.
            after = until_every_worker_serves(api, access_log, newest.version)

    assert refused["status_code"] == 200 and refused["snapshot"] == good.version
    assert "no publish makes" in refused["refused"], refused
    assert page.status_code == 200
    assert page.headers["x-snapshot-version"] == good.version
    assert CANARY not in page.text and "environment" not in page.text
    assert mismatch["snapshot"] == good.version
    assert "does not match the checksum" in mismatch["refused"], mismatch
    assert page_meanwhile.status_code == 200 and CANARY not in page_meanwhile.text
    assert not tampered_kept, "a download that failed its checksum was kept"
    assert not [answer for answer in after.values() if "refused" in answer], after


def test_a_server_that_starts_on_a_hostile_snapshot_serves_nothing_and_says_why(
    synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    genuine = home_with_published_snapshot(synced_home, home)
    folder = genuine.parent
    # An analyst view of the publish's own name, now reading the server's files.
    view = _a_view(genuine)
    attack = folder / f"{snapshots.PREFIX}{snapshots.new_version()}{snapshots.SUFFIX}"
    hostile_copy(
        genuine,
        attack,
        f"CREATE OR REPLACE VIEW {view} AS SELECT content FROM read_text('/proc/self/environ')",
    )
    (folder / snapshots.POINTER).write_text(attack.name, encoding="utf-8")
    keys_file = tmp_path / "keys" / "api-keys.json"
    key = KeyFile(keys_file).create("clients", ["all"])
    settings = {"DUCTWORK_API_KEYS_FILE": str(keys_file), "CANARY_SECRET": CANARY}

    api = start_serve(home, 1, settings, until="answering")
    try:
        found = until_ready_says(api.url, snapshots.version_of(attack.name), "refused")
        page = products_page(api.url, key)
        # The publisher's file again: served at the next check, the refusal over.
        (folder / snapshots.POINTER).write_text(genuine.name, encoding="utf-8")
        deadline = time.monotonic() + WAIT_S
        while ready(api.url)["status_code"] != 200:
            assert time.monotonic() < deadline, ready(api.url)
            time.sleep(0.1)
        after = ready(api.url)
    finally:
        stop_serve(api)

    assert found["status_code"] == 503, found
    assert f"its view main.{view} is not the one a publish makes" in found["refused"], found
    assert page.status_code == 503 and CANARY not in page.text
    assert after["snapshot"] == snapshots.version_of(genuine.name)
    assert "refused" not in after


def _a_view(snapshot: Path) -> str:
    """The first analyst view a publish makes."""
    with duckdb.connect(str(snapshot), read_only=True) as con:
        (found,) = con.execute(
            "SELECT min(view_name) FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
        ).fetchall()[0]
    assert found is not None
    return found
