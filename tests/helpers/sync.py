"""Syncing a data folder in this process, changing the upstream, and reading the result."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import httpx

from ductwork import snapshots
from ductwork.contract.paths import LEADS
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.snapshots import guard
from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED
from pipelines.jobs import RECONCILE_CONFIG
from sandbox.admin_client import SandboxAdmin
from sandbox.local_server import serving
from sandbox.server import SandboxHandle
from serve.app import create_app
from tests.conftest import UNLIMITED, ObjectStoreServer, ReadApi, resources_for


def sync(
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer, reconcile: bool = False
) -> dg.ExecuteInProcessResult:
    """One run of every stream and the publish, as the sync_all (or reconcile_all) job does."""
    result = dg.materialize(
        [*SYNCED_AND_PUBLISHED, *ALL_CHECKS],
        resources=resources_for(home, upstream.url, store),
        run_config=RECONCILE_CONFIG if reconcile else None,
    )
    assert result.success
    return result


def metadata_by_asset(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    """Each materialised asset's metadata values."""
    found = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        values = {key: value.value for key, value in materialization.metadata.items()}
        found[materialization.asset_key.path[-1]] = values
    return found


@contextmanager
def api_over(home: Path, key: str | None = None) -> Iterator[ReadApi]:
    """The read API over a data folder's current snapshot (with a new key unless given one)."""
    settings = HomeSettings(home=home)
    key = key or KeyFile(settings.keys_path).create("tests", ["all"])
    with serving(create_app(settings, UNLIMITED)) as url:
        yield ReadApi(url, key, home)


def mutate(upstream: SandboxHandle, **counts: int) -> dict:
    """Change the sandbox's data through its admin API."""
    return SandboxAdmin(upstream.url, upstream.api_key, timeout_s=60).mutate(counts)


def delete_upstream(upstream: SandboxHandle, lead_id: str) -> None:
    """Delete one lead upstream, through the sandbox's admin API."""
    assert SandboxAdmin(upstream.url, upstream.api_key, timeout_s=60).delete_leads([lead_id]) == [
        lead_id
    ]


def listed_leads(base_url: str, key: str, fields: str | None = None) -> list[dict]:
    """A server's whole lead list (the upstream's or the read API's), in its order."""
    leads: list[dict] = []
    query: dict[str, str | int] = {"count": 1000} | ({"fields": fields} if fields else {})
    while True:
        page = httpx.get(
            base_url + LEADS, params=query, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ).json()["data"]
        leads += page
        if len(page) < 1000:
            return leads
        query = {**query, "cursorCreatedDate": page[-1]["CreatedDate"], "cursorId": page[-1]["Id"]}


def published_snapshot_is_whole(home: Path) -> None:
    """The current snapshot, if any, opens read-only and carries its completion marker."""
    found = snapshots.current(HomeSettings(home=home).snapshots_dir)
    if found is None:
        return
    with duckdb.connect(str(found.path), read_only=True) as con:
        version = con.execute("SELECT version FROM snapshot_info").fetchall()
        assert version == [(found.version,)]
        con.execute("SELECT count(*) FROM serving_digital_assets").fetchall()


def publish_altered_copy(snapshots_dir: Path, statement: str) -> Path:
    """Publish a copy of the current snapshot changed by one SQL ``statement``, as a sync would
    publish a new version: the copy under a new version's name, then the pointer to it."""
    current = snapshots.current(snapshots_dir)
    assert current is not None
    changed = snapshots_dir / f"{snapshots.PREFIX}{snapshots.new_version()}.duckdb"
    shutil.copyfile(current.path, changed)
    with duckdb.connect(str(changed)) as con:
        con.execute(statement)
    guard.write_checksum(changed)
    (snapshots_dir / snapshots.POINTER).write_text(changed.name, encoding="utf-8")
    return changed


# How long a test waits for the read API to serve a snapshot just published (it checks the
# pointer every half second).
NEW_SNAPSHOT_LIMIT_S = 30


def first_answer_of_a_new_snapshot(
    url: str, headers: dict[str, str], version: str
) -> httpx.Response:
    """GET ``url`` until its answer comes from a snapshot other than ``version`` (the read API
    serves the snapshot published since); fails after ``NEW_SNAPSHOT_LIMIT_S``."""
    deadline = time.monotonic() + NEW_SNAPSHOT_LIMIT_S
    while True:
        answer = httpx.get(url, headers=headers)
        if answer.headers["x-snapshot-version"] != version:
            return answer
        assert time.monotonic() < deadline, "the new snapshot was not served"
        time.sleep(0.05)  # polls; times nothing
