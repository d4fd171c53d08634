"""A publish reaches every worker of ``ductwork serve`` without traffic: each worker looks at the
``CURRENT`` pointer a few times a second, loads a new snapshot itself and says which one it
serves (``ductwork.serving_workers``). A request of the past naming a version the worker has not
loaded yet loads it first rather than answer 400. Through ``ductwork sync`` and ``ductwork serve``
as operators run them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ductwork import serving_workers, snapshots
from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.bursts import logged_pids
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import serving_process
from tests.helpers.sync import mutate

WORKERS = 2
SERVED_WITHIN_S = 1.0  # after ``ductwork sync`` exits, what docs/read-api.md promises
# Each request opens a new connection, which the kernel hands to whichever worker accepts it
# first; past this many without every worker answering, the test fails rather than loop.
MAX_CONNECTIONS = 200
# Long enough that no worker looks at the pointer while the test runs: only a request can make
# it load the new publish.
NEVER_S = "300"
START_LIMIT_S = 60.0  # for every worker to load its first snapshot once one answers /readyz


@dataclass(frozen=True)
class SyncedFolder:
    """A data folder after a first ``ductwork sync``, with the sync's environment and a key."""

    home: Path
    env: dict[str, str]
    key: str

    @property
    def snapshots_dir(self) -> Path:
        return HomeSettings(home=self.home).snapshots_dir

    def version(self) -> str:
        """The version the folder's pointer names."""
        found = snapshots.current(self.snapshots_dir)
        assert found is not None
        return found.version


@pytest.fixture(scope="module")
def changing_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, changed before each further sync."""
    with object_store.sandbox(5151) as handle:
        yield handle


@pytest.fixture(scope="module")
def synced(
    changing_upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> SyncedFolder:
    home = tmp_path_factory.mktemp("publishes")
    env = sync_env(home, changing_upstream, object_store, UPSTREAM_KEY)
    done = ductwork("sync", env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    key = KeyFile(HomeSettings(home=home).keys_path).create("publishes", ["all"])
    return SyncedFolder(home, env, key)


def sync_a_change(folder: SyncedFolder, upstream: SandboxHandle) -> tuple[str, str, float]:
    """Change the upstream and run ``ductwork sync`` as a process: the version served before,
    the one it published and the moment (``time.monotonic``) the process exited."""
    before = folder.version()
    mutate(upstream, products_changed=20, assets_added=3)
    done = ductwork("sync", env=folder.env)
    exited = time.monotonic()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    after = folder.version()
    assert after != before, "the sync published no new snapshot"
    return before, after, exited


def announced_by_every_worker(snapshots_dir: Path, workers: int = WORKERS) -> dict[int, str]:
    """What each worker says it serves, once all ``workers`` have said it (bounded wait: a
    worker may still be loading when another already answers)."""
    deadline = time.monotonic() + START_LIMIT_S
    while len(served := serving_workers.serving(snapshots_dir)) < workers:
        assert time.monotonic() < deadline, f"only {len(served)} workers announced a snapshot"
        time.sleep(0.05)  # polls; times nothing
    return served


def answers_from_every_worker(
    url: str, key: str, access_log: Path, workers: int = WORKERS
) -> list[httpx.Response]:
    """GET ``url`` with ``key``, each time on a fresh connection, until the access log shows
    that each of ``workers`` answered at least once; every answer, in order."""
    answers: dict[str, httpx.Response] = {}
    tag = uuid.uuid4().hex[:8]
    for n in range(MAX_CONNECTIONS):
        request_id = f"fresh-{tag}-{n}"
        headers = {"Authorization": f"Bearer {key}", "X-Request-ID": request_id}
        answers[request_id] = httpx.get(url, headers=headers, timeout=30)
        if len(set(logged_pids([access_log], set(answers)).values())) == workers:
            return list(answers.values())
    pytest.fail(f"{MAX_CONNECTIONS} fresh connections did not reach all {workers} workers")


def test_every_worker_serves_a_new_publish_within_a_second_of_the_sync_without_any_request(
    synced: SyncedFolder, changing_upstream: SandboxHandle, tmp_path: Path
) -> None:
    access_log = tmp_path / "access.log"
    with access_log.open("wb") as out, serving_process(synced.home, WORKERS, stdout=out) as api:
        served = announced_by_every_worker(synced.snapshots_dir)
        assert set(served.values()) == {synced.version()}

        _, new, exited = sync_a_change(synced, changing_upstream)
        # No request is sent: each worker finds the publish itself and says so.
        late = serving_workers.wait_until_served(synced.snapshots_dir, new, SERVED_WITHIN_S)
        assert late == {}, f"workers still serving an older snapshot: {late}"
        assert time.monotonic() - exited < SERVED_WITHIN_S
        # The claim is about a moment one second after the exit; waiting for it synchronises
        # with nothing.
        time.sleep(max(0.0, exited + SERVED_WITHIN_S - time.monotonic()))

        answers = answers_from_every_worker(api.url + paths.PRODUCTS_LIST, synced.key, access_log)
        assert {answer.status_code for answer in answers} == {200}
        assert {answer.headers["x-snapshot-version"] for answer in answers} == {new}
    assert serving_workers.serving(synced.snapshots_dir) == {}, "a stopped worker still announces"


def test_a_request_of_the_past_naming_a_version_a_worker_has_not_loaded_yet_is_answered_from_it(
    synced: SyncedFolder, changing_upstream: SandboxHandle, tmp_path: Path
) -> None:
    access_log = tmp_path / "access.log"
    lagging = {"DUCTWORK_SERVE_PUBLISH_CHECK_S": NEVER_S}
    with (
        access_log.open("wb") as out,
        serving_process(synced.home, WORKERS, lagging, stdout=out) as api,
    ):
        announced_by_every_worker(synced.snapshots_dir)
        old, new, _ = sync_a_change(synced, changing_upstream)
        served = serving_workers.serving(synced.snapshots_dir)
        # Neither worker looked at the pointer since: only the request can make them load it.
        assert len(served) == WORKERS and set(served.values()) == {old}

        past = f"{api.url}/_ductwork/v1/at/{new}{paths.PRODUCTS_LIST}"
        answers = answers_from_every_worker(past, synced.key, access_log)
        assert [answer.status_code for answer in answers] == [200] * len(answers), answers[0].text
        assert {answer.headers["x-snapshot-version"] for answer in answers} == {new}
        assert all("memento-datetime" in answer.headers for answer in answers)
        # Each worker loaded the publish to answer it, and serves it from then on.
        served = serving_workers.serving(synced.snapshots_dir)
        assert set(served.values()) == {new}
        present = answers_from_every_worker(api.url + paths.PRODUCTS_LIST, synced.key, access_log)
        assert {answer.headers["x-snapshot-version"] for answer in present} == {new}
