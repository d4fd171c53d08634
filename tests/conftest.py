"""Shared fixtures: a real sandbox upstream, a synced data folder and the read API over it."""

from __future__ import annotations

import gc
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from assets.resources import ObjectStore, resources_for_home
from ductwork import snapshots
from ductwork.keys import GRANTABLE_SCOPES, KeyFile
from ductwork.settings import HomeSettings, S3Settings, ServeSettings, upstream_environment
from ductwork.snapshots import guard
from sandbox.local_server import serving
from sandbox.server import SandboxHandle, running_sandbox, seed_bucket
from serve.app import create_app
from tests.helpers.redis_server import running_redis

ROOT = Path(__file__).parent.parent
UPSTREAM_KEY = "upstream-secret-key-for-tests"
SEED = 20261122
# `make test` runs at small scale; DUCTWORK_TEST_SCALE=medium repeats the suite on medium data.
SCALE = os.environ.get("DUCTWORK_TEST_SCALE", "small")
BUCKET = "ductwork-tests"
# The differential tests send thousands of requests with one key (and many a 401 or 404); the
# upstream has no such limits to compare with, so the read API under comparison runs without.
UNLIMITED = ServeSettings(
    serve_key_requests_per_second=1_000_000, serve_failed_requests_per_second=1_000_000
)
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request lines
# moto accepts any credentials; boto3 only needs some to sign with.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")


# A skipped test proves nothing, so a run with one fails; set to 1 to accept skips on purpose.
ALLOW_SKIPS = "DUCTWORK_ALLOW_SKIPS"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a run that skipped any test, unless ``DUCTWORK_ALLOW_SKIPS=1``.

    Then free what the tests left behind while the interpreter is whole: each read API freezes
    its snapshot's objects out of the collector, and DuckDB objects destroyed during
    interpreter shutdown can abort the process after every test has passed.
    """
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if skipped and os.environ.get(ALLOW_SKIPS) != "1" and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter.line("")  # the progress line may still be open
        reporter.write_sep(
            "=", f"{skipped} skipped: the run fails unless {ALLOW_SKIPS}=1", red=True, bold=True
        )
    gc.unfreeze()
    gc.collect()


@dataclass(frozen=True)
class ObjectStoreServer:
    """moto's S3 server on loopback, with the test bucket created and seeded with manuals."""

    endpoint_url: str
    bucket: str

    def resource(self) -> ObjectStore:
        """The Dagster resource pointing at it."""
        return ObjectStore(bucket=self.bucket, endpoint_url=self.endpoint_url)

    def sandbox(self, seed: int, scale: str = "small") -> AbstractContextManager[SandboxHandle]:
        """A sandbox upstream of its own on a free port, listing this store's bucket."""
        return running_sandbox(
            seed=seed,
            scale=scale,
            api_key=UPSTREAM_KEY,
            s3_endpoint_url=self.endpoint_url,
            s3_bucket=self.bucket,
        )


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStoreServer]:
    """A real S3 endpoint (moto server) for the sandbox and the sync alike."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    store = ObjectStoreServer(f"http://{host}:{port}", BUCKET)
    client = store.resource().client()
    client.create_bucket(Bucket=BUCKET)
    seed_bucket(client, BUCKET, SEED, 25)
    yield store
    server.stop()


def resources_for(
    home: Path, upstream_url: str, store: ObjectStoreServer, api_key: str = UPSTREAM_KEY
) -> dict:
    """The resources a test sync runs with: real upstream, S3 and a DuckDB file under ``home``."""
    s3 = S3Settings(s3_endpoint_url=store.endpoint_url, s3_bucket=store.bucket)
    return resources_for_home(home, upstream_url, api_key, s3)


@pytest.fixture(scope="session")
def upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """The sandbox upstream (small scale by default) on a free loopback port, listing the same
    bucket."""
    with object_store.sandbox(SEED, SCALE) as handle:
        yield handle


@pytest.fixture(scope="session")
def synced_home(
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A data folder after one full ``ductwork sync`` of every stream (the command as operators
    run it, on the folder's instance on disk), with a published snapshot."""
    home = tmp_path_factory.mktemp("synced")
    env = {
        **os.environ,
        "DUCTWORK_HOME": str(home),
        **upstream_environment(upstream.url, UPSTREAM_KEY, object_store.endpoint_url, BUCKET),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sync"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return home


def home_with_published_snapshot(synced_home: Path, home: Path) -> Path:
    """``home`` gets a copy of the synced folder's current snapshot, made current there, and
    an empty warehouse; returns the copy."""
    published = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
    assert published is not None
    target = HomeSettings(home=home).snapshots_dir
    target.mkdir(parents=True)  # the warehouse stays empty: no sync ran here
    copy = target / published.path.name
    shutil.copyfile(published.path, copy)
    checksum = guard.checksum_path
    shutil.copyfile(checksum(published.path), checksum(copy))  # as a replica's download has it
    (target / snapshots.POINTER).write_text(copy.name, encoding="utf-8")
    return copy


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real Redis server on loopback for the session (no persistence): its ``redis://`` URL."""
    with running_redis() as url:
        yield url


@dataclass(frozen=True)
class ReadApi:
    """The read API on a real loopback server, with a key of every scope."""

    url: str
    key: str
    home: Path


@pytest.fixture(scope="session")
def read_api(synced_home: Path) -> Iterator[ReadApi]:
    """The read API over the synced data folder."""
    settings = HomeSettings(home=synced_home)
    key = KeyFile(settings.keys_path).create("tests", list(GRANTABLE_SCOPES))
    with serving(create_app(settings, UNLIMITED)) as url:
        yield ReadApi(url, key, synced_home)
