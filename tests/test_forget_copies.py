"""``ductwork forget`` leaves no copy of a forgotten lead's person: once it ran, no snapshot,
change file, rebuild of the past, object of the store or replica holds the lead's email or
phone, and no running server answers its past (``erase_copies``, the command's second step,
refuses while the current snapshot still holds the lead).

The data folder is built as users build it: ``ductwork sync`` as a process against the sandbox,
publishing to an object store (moto's S3 server) that a replica folder follows; a lead created,
changed twice and deleted upstream, with a sync each time, so that several snapshots, their
change files and the history hold its versions; then ``ductwork forget`` as a process. After
it, ``ductwork diff`` across the same publishes counts the same changes less the lead's, and
once a reconciliation read every lead, the mirror answers the lead list as the upstream does.
Its key stays where the feed must tell consumers it went (a ``delete``): what is searched for
is what identifies the person.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest

from ductwork import snapshots
from ductwork.erasure.audit import audit_path
from ductwork.erasure.copies import StillHeld, erase_copies, holds
from ductwork.erasure.local_files import PAST_FOLDER, read_marker, write_marker
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, S3Settings
from ductwork.snapshots.store import SnapshotStore, fetch_current
from ductwork.streams.registry import stream_named
from sandbox.server import SandboxHandle
from serve import past_states
from serve.erasures import Erasures
from serve.gzip_cache import AnswerCache
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import both_keys, compare_all, walk_requests
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import RunningApi, serving_process
from tests.helpers.sync import api_over, delete_upstream, mutate
from tests.helpers.text_search import text_hits

pytestmark = pytest.mark.timeout(900)

SEED = 53  # tiny: 2,000 leads from a bulk import more than a year before the newer ones
NEWER_LEADS = 40  # inside the window an incremental sync re-reads
CHANGED = 30  # leads changed by each mutation, most of them among the newer
LEAD_STEPS = ("--select", "crm_leads", "--select", "crm_lead_details")
STORE = "s3://ductwork-forget/snapshots"
LEADS = "/crm/v1.1/leads"
AT = "/_ductwork/v1/at"
ANSWER_LIMIT_S = 60.0  # for every worker to answer as after the erasure


@dataclass
class Forgotten:
    """The shared data folder: its sandbox, environment, read-API key, store, replica folder,
    the lead to forget with what identifies the person, and the versions published."""

    upstream: SandboxHandle
    home: Path
    env: dict[str, str]
    key: str
    store: SnapshotStore
    replica: Path
    lead: str
    person: tuple[str, ...]  # the lead's email and phone
    other: str  # a lead changed as often, not forgotten
    versions: list[str]  # every publish before the erasure, oldest first


def synced(forgotten: Forgotten, *args: str) -> None:
    """``ductwork sync ARGS`` as a process (it must succeed); the replica then follows."""
    done = ductwork("sync", *args, env=forgotten.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fetch_current(forgotten.store, forgotten.replica)
    live = snapshots.current(forgotten.home / "snapshots")
    assert live is not None
    if not forgotten.versions or forgotten.versions[-1] != live.version:
        forgotten.versions.append(live.version)


def unique_person(snapshot: Path, candidates: set[str]) -> tuple[str, tuple[str, ...]]:
    """A lead of ``candidates`` whose email and phone no other lead shares, and what is
    searched for to find any copy of it: its email and its phone. (Not its name: the sandbox
    gives its leads some eighty names, each shared by many.)"""
    with duckdb.connect(str(snapshot), read_only=True) as con:
        rows = con.execute(
            "SELECT id, email, phone FROM lead_details d WHERE list_contains(?, id) "
            "AND email IS NOT NULL AND phone IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM lead_details o WHERE o.id <> d.id AND "
            "(o.email = d.email OR o.phone = d.phone)) ORDER BY id",
            [sorted(candidates)],
        ).fetchall()
    assert len(rows) >= 2, "no two leads changed twice with details of their own"
    return rows[0][0], (rows[0][1], rows[0][2])


@pytest.fixture(scope="module")
def forgotten(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Forgotten]:
    home = tmp_path_factory.mktemp("forget")
    replica = tmp_path_factory.mktemp("forget-replica") / "snapshots"
    s3 = S3Settings(s3_endpoint_url=object_store.endpoint_url, s3_bucket=object_store.bucket)
    with object_store.sandbox(SEED, "tiny") as upstream:
        env = {
            **sync_env(home, upstream, object_store, UPSTREAM_KEY),
            "DUCTWORK_SNAPSHOT_STORE": STORE,
        }
        key = KeyFile(HomeSettings(home=home).keys_path).create("forget", ["all"])
        state = Forgotten(
            upstream, home, env, key, SnapshotStore.connect(STORE, s3), replica, "", (), "", []
        )
        synced(state, *LEAD_STEPS)
        mutate(upstream, leads_added=NEWER_LEADS)
        synced(state, *LEAD_STEPS)
        first = set(mutate(upstream, leads_changed=CHANGED)["leads_changed"])
        synced(state, *LEAD_STEPS)
        second = set(mutate(upstream, leads_changed=CHANGED)["leads_changed"])
        synced(state, *LEAD_STEPS)
        live = snapshots.current(home / "snapshots")
        assert live is not None
        state.lead, state.person = unique_person(live.path, first & second)
        state.other = sorted((first & second) - {state.lead})[0]
        delete_upstream(upstream, state.lead)
        synced(state, *LEAD_STEPS)  # the window's re-read finds it gone
        yield state


def forget(forgotten: Forgotten) -> dict[str, int]:
    """``ductwork forget`` of the lead as a process (it must succeed); the copies it removed,
    as its audit log says."""
    done = ductwork("forget", "leads", forgotten.lead, "--reason", "asked", env=forgotten.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fetch_current(forgotten.store, forgotten.replica)
    live = snapshots.current(forgotten.home / "snapshots")
    assert live is not None and live.version != forgotten.versions[-1]
    forgotten.versions.append(live.version)
    lines = audit_path(forgotten.home).read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])["copies_removed"]


def duckdb_holds(path: Path, needles: tuple[str, ...]) -> list[str]:
    """Where a DuckDB file holds any of ``needles`` (``file:table.column``)."""
    return [f"{path.name}:{table}.{column}" for table, column, _ in text_hits(path, needles)]


def folder_holds(folder: Path, needles: tuple[str, ...]) -> list[str]:
    """Where any file under ``folder`` holds any of ``needles``: DuckDB files asked with
    DuckDB, every other file searched byte by byte."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        if path.name.endswith(snapshots.SUFFIX):
            found += duckdb_holds(path, needles)
        elif any(needle.encode() in path.read_bytes() for needle in needles):
            found.append(str(path.relative_to(folder)))
    return found


def store_holds(store: SnapshotStore, needles: tuple[str, ...], scratch: Path) -> list[str]:
    """Where any object under the store's prefix holds any of ``needles``."""
    client = store._client  # the test reads every object, whatever its name
    found = []
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=store.location.bucket, Prefix=store.location.prefix
    )
    for page in pages:
        for item in page.get("Contents", []):
            name = item["Key"]
            body = client.get_object(Bucket=store.location.bucket, Key=name)["Body"].read()
            if name.endswith(snapshots.SUFFIX):
                copy = scratch / Path(name).name
                copy.write_bytes(body)
                found += duckdb_holds(copy, needles)
                copy.unlink()
            elif any(needle.encode() in body for needle in needles):
                found.append(name)
    return found


def lead_changes(forgotten: Forgotten, since: str, until: str) -> int:
    """The leads added, changed and deleted between two publishes, as ``ductwork diff`` counts
    them."""
    done = ductwork("diff", "--from", since, "--to", until, "--stream", "leads", "--format",
                    "json", env=forgotten.env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [leads] = json.loads(done.stdout)["streams"]
    return leads["added"] + leads["changed"] + leads["deleted"]


def get(api: RunningApi, key: str, path: str, **query: object) -> httpx.Response:
    return httpx.get(
        api.url + path, params=query, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def past_leads(api: RunningApi, key: str, version: str) -> list[dict]:
    """The whole lead list as served at ``version``, in its order."""
    leads: list[dict] = []
    query: dict[str, object] = {"count": 1000}
    while True:
        answer = get(api, key, f"{AT}/{version}{LEADS}", **query)
        assert answer.status_code == 200, answer.text[:500]
        page = answer.json()["data"]
        leads += page
        if len(page) < 1000:
            return leads
        query = {"count": 1000, "cursorCreatedDate": page[-1]["CreatedDate"]}
        query["cursorId"] = page[-1]["Id"]


def lead_answers(api: RunningApi, key: str, version: str, lead: str) -> list[int]:
    """The status of the lead's past lookup, asked enough times for every worker to answer."""
    return [get(api, key, f"{AT}/{version}{LEADS}/{lead}").status_code for _ in range(12)]


def test_the_rebuilt_folder_names_match_the_servers() -> None:
    assert past_states.PAST_FOLDER == PAST_FOLDER


@pytest.mark.parametrize(
    ("statement", "held"),
    [
        ("INSERT INTO contractors VALUES ('C-0042', 'A firm')", True),
        ("INSERT INTO history.contractor_reviews VALUES ('C-0042', 'R-1')", True),
        ("INSERT INTO contractors_raw VALUES ('{\"contractorId\": \"C-0042\"}')", True),
        ("INSERT INTO history.feed_log VALUES ('contractors', 3, 'C-0042', false)", True),
        # A logged deletion names the key alone: the erasure logs one for the feed to tell.
        ("INSERT INTO history.feed_log VALUES ('contractors', 3, 'C-0042', true)", False),
        ("INSERT INTO history.feed_state VALUES ('contractors', 'C-0042', 1, 3)", True),
        ("INSERT INTO contractors VALUES ('C-0043', 'C-0042 named in a text')", False),
        ("INSERT INTO history.feed_log VALUES ('leads', 3, 'C-0042', true)", False),
    ],
)  # fmt: skip
def test_a_file_holds_a_key_wherever_its_stream_keeps_it(
    tmp_path: Path, statement: str, held: bool
) -> None:
    path = tmp_path / "snapshot-x.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA history")
        con.execute("CREATE TABLE contractors (contractor_id VARCHAR, name VARCHAR)")
        con.execute("CREATE TABLE contractors_raw (body JSON)")
        con.execute("CREATE TABLE history.contractor_reviews (contractor_id VARCHAR, id VARCHAR)")
        con.execute("CREATE TABLE history.feed_log (stream VARCHAR, seq BIGINT, key VARCHAR, "
                    "deleted BOOLEAN)")  # fmt: skip
        con.execute("CREATE TABLE history.feed_state (stream VARCHAR, key VARCHAR, "
                    "record_hash UBIGINT, since BIGINT)")  # fmt: skip
        con.execute(statement)
    assert holds(path, stream_named("contractors"), ["C-0042"]) is held


def test_a_file_that_cannot_be_read_counts_as_holding_the_key(tmp_path: Path) -> None:
    path = tmp_path / "snapshot-x.duckdb"
    path.write_bytes(b"not a database")
    contractors = stream_named("contractors")
    assert holds(path, contractors, ["C-0042"])
    with pytest.raises(duckdb.Error):
        holds(path, contractors, ["C-0042"], unreadable=False)


def test_a_workers_kept_answers_go_at_the_next_erasure_only(tmp_path: Path) -> None:
    erasures = Erasures(tmp_path)
    answers = AnswerCache(1 << 20, erasures)
    key = (b"v1", "/crm/v1.1/leads", (), b"application/json")
    answers.put(key, b"kept")
    assert not erasures.look() and answers.get(key) == b"kept"  # no marker, no erasure
    write_marker(tmp_path)
    assert erasures.look() and not erasures.look()  # seen once
    assert answers.get(key) is None and answers.size_bytes == 0
    answers.put(key, b"kept again")
    assert answers.get(key) == b"kept again"


def test_every_copy_of_a_forgotten_lead_is_removed(forgotten: Forgotten, tmp_path: Path) -> None:
    folder = forgotten.home / "snapshots"
    earlier = forgotten.versions[1:]  # the first publish is older than the lead
    assert folder_holds(folder, forgotten.person)  # the copies to remove are there
    with pytest.raises(StillHeld):  # the warehouse's erasure and its publish come first
        erase_copies(HomeSettings(home=forgotten.home), "leads", [forgotten.lead], forgotten.store)
    replica_home = tmp_path / "replica"
    replica_settings = {
        "DUCTWORK_SNAPSHOT_STORE": STORE,
        "DUCTWORK_SNAPSHOT_POLL_S": "0.5",
        "DUCTWORK_S3_ENDPOINT_URL": forgotten.env["DUCTWORK_S3_ENDPOINT_URL"],
        "DUCTWORK_API_KEYS_FILE": str(HomeSettings(home=forgotten.home).keys_path),
    }
    with (
        serving_process(forgotten.home, 2) as api,
        serving_process(replica_home, 1, replica_settings) as replica,
    ):
        # The replica rebuilds an earlier publish from its current snapshot's history.
        assert 200 in lead_answers(replica, forgotten.key, earlier[0], forgotten.lead)
        assert list((replica_home / "snapshots" / PAST_FOLDER).glob("past-*"))
        before: dict[str, tuple[list[dict], dict]] = {}
        for version in earlier:
            listed = past_leads(api, forgotten.key, version)
            deleted = version == earlier[-1]  # published after the upstream deleted it
            assert (forgotten.lead in {lead["Id"] for lead in listed}) is not deleted
            other = get(api, forgotten.key, f"{AT}/{version}{LEADS}/{forgotten.other}")
            assert other.status_code == 200
            before[version] = (listed, other.json())
        held = [v for v in earlier if 200 in lead_answers(api, forgotten.key, v, forgotten.lead)]
        assert held == earlier[:-1]  # served until deleted upstream
        diffed_before = lead_changes(forgotten, earlier[0], earlier[-2])
        counts = forget(forgotten)
        # Everyone else's history is intact: across the same instants, the same changes less
        # the forgotten lead's one.
        assert lead_changes(forgotten, earlier[0], earlier[-2]) == diffed_before - 1
        assert counts["snapshot_files"] == len(earlier)
        assert counts["store_objects"] == 2 * len(earlier)  # each file and its checksum
        assert folder_holds(folder, forgotten.person) == []
        assert read_marker(folder) is not None
        for version in earlier:
            assert_answers_as_never_held(api, forgotten, version, before[version])
        assert folder_holds(folder, forgotten.person) == []  # the rebuilds hold none either
        assert list((folder / PAST_FOLDER).glob("past-*"))
        changes = get(api, forgotten.key, "/_ductwork/v1/changes/leads", limit=10_000)
        assert forgotten.lead not in changes.text
        # The replica follows: the store's marker makes it drop its local copies and answers.
        deadline = time.monotonic() + ANSWER_LIMIT_S
        while set(lead_answers(replica, forgotten.key, earlier[0], forgotten.lead)) != {404}:
            assert time.monotonic() < deadline, "the replica still serves the forgotten lead"
        assert folder_holds(replica_home / "snapshots", forgotten.person) == []
    assert store_holds(forgotten.store, forgotten.person, tmp_path) == []
    fetch_current(forgotten.store, forgotten.replica)
    named = forgotten.store.snapshot_names()
    local = {path.name for path in forgotten.replica.glob(f"{snapshots.PREFIX}*")}
    assert {name for name in local if name.endswith(snapshots.SUFFIX)} <= named
    assert read_marker(forgotten.replica) == read_marker(folder)
    assert folder_holds(forgotten.replica, forgotten.person) == []
    # The mirror still answers as the upstream once a reconciliation read every lead (the
    # incremental syncs above re-read only the recent ones): every page of the lead list, and
    # the forgotten lead's lookup, the upstream's 404.
    synced(forgotten, "--reconcile", *LEAD_STEPS)
    upstream = forgotten.upstream
    requests = [*walk_requests(upstream, 1000), *walk_requests(upstream, 50),
                (f"{LEADS}/{forgotten.lead}", {})]  # fmt: skip
    with api_over(forgotten.home, forgotten.key) as served:
        compare_all(upstream, served, requests, both_keys(upstream, served))


def assert_answers_as_never_held(
    api: RunningApi, forgotten: Forgotten, version: str, before: tuple[list[dict], dict]
) -> None:
    """The lead's past lookup at ``version`` answers 404 on every worker (within a deadline:
    each worker notices the erasure by itself), its past list is the one before without it,
    and another lead's past lookup is as before."""
    deadline = time.monotonic() + ANSWER_LIMIT_S
    while set(lead_answers(api, forgotten.key, version, forgotten.lead)) != {404}:
        assert time.monotonic() < deadline, f"{version}: the forgotten lead is still served"
    listed, other = before
    assert past_leads(api, forgotten.key, version) == [
        lead for lead in listed if lead["Id"] != forgotten.lead
    ]
    again = get(api, forgotten.key, f"{AT}/{version}{LEADS}/{forgotten.other}")
    assert again.status_code == 200 and again.json() == other
