"""The data's age on every answer (serve/data_age.py): ``X-Synced-At`` from the streams' sync
times that each publish writes (ductwork/snapshots/sync_times.py), moved by a sync that changed
nothing, copied by replicas, kept by a stream whose upstream fails while the others move, and
``DUCTWORK_SERVE_MAX_AGE_S`` failing a stale stream's paths and ``/readyz`` loudly. Through
``ductwork sync`` and ``ductwork serve`` as operators run them."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract import paths
from ductwork.contract.encoding import format_datetime, parse_datetime
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, S3Settings
from ductwork.snapshots import sync_times
from ductwork.snapshots.store import SnapshotStore, fetch_current
from ductwork.streams.registry import STREAMS, stream_serving
from sandbox.fault_settings import Faults
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import start_serve, stop_serve

# A data path of each kind the API answers: a lookup and a list of the short path, a list of
# the routes, a cursor list, a document; each with the stream it draws on.
DATA_PATHS = {
    "/products/v2.0/products?count=2": "products",
    "/products/v2.0/pairings?count=2": "pairings",
    "/warehouse/v1.0/digital-assets?count=2": "digital-assets",
    f"{paths.LEADS}?count=2": "leads",
    "/internal/v1.0/accounts/contractors": "contractors",
}
SETTLE_LIMIT_S = 30  # a worker checks the snapshots folder every half second


def test_every_spec_path_of_a_stream_is_mapped_to_it_and_the_mirrors_own_paths_are_not() -> None:
    for stream in STREAMS:
        assert stream_serving(stream.path) is stream
    assert stream_serving("/products/v2.0/units/SKU-1").name == "products"
    assert stream_serving("/products/v2.0/indoor-units/SKU-1").name == "products"
    assert stream_serving(f"{paths.LEADS}/00Q000000000001").name == "leads"
    for other in ("/readyz", "/metrics", "/_ductwork/v1/changes/leads", "/internal/v1.0/jobs/x"):
        assert stream_serving(other) is None


def test_a_sync_times_file_that_is_not_one_is_refused_and_read_as_none(tmp_path: Path) -> None:
    moment = datetime(2026, 3, 1, 12, 34, 56, 789000, tzinfo=UTC)
    assert sync_times.decode(sync_times.encode({"leads": moment})) == {"leads": moment}
    for bad in (b"", b"[]", b'{"streams": {"leads": "yesterday"}}', b"{" * (2 << 20)):
        with pytest.raises(ValueError):
            sync_times.decode(bad)
    (tmp_path / sync_times.SYNCED).write_bytes(b"not json")
    assert sync_times.read(tmp_path) == {}


def synced_headers(url: str, key: str) -> dict[str, str]:
    """Each data path's ``X-Synced-At`` (every answer must be a 200 carrying one)."""
    found = {}
    for path in DATA_PATHS:
        answer = httpx.get(url + path, headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200, (path, answer.text[:300])
        found[path] = answer.headers["x-synced-at"]
    return found


def until_changed(
    url: str, key: str, before: dict[str, str], kept: str | None = None
) -> dict[str, str]:
    """The data paths' ``X-Synced-At`` once the server has read the new times: every path's
    changed but those of the stream ``kept``. The paths are asked one after another, so a
    server that reads the new times between two of them answers the first with the old."""
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while True:
        found = synced_headers(url, key)
        moving = [path for path, stream in DATA_PATHS.items() if stream != kept]
        if all(found[path] != before[path] for path in moving):
            return found
        assert time.monotonic() < deadline, "the new sync times were not served"
        time.sleep(0.1)  # polls; times nothing


def test_answers_carry_each_streams_sync_time_and_a_sync_that_changed_nothing_moves_it(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
    started = datetime.now(UTC)
    assert ductwork("sync", env=env).returncode == 0
    folder = HomeSettings(home=tmp_path).snapshots_dir
    first = sync_times.read(folder)
    assert set(first) == {stream.name for stream in STREAMS}
    assert all(started <= moment <= datetime.now(UTC) for moment in first.values())
    version = snapshots.current(folder).version
    key = KeyFile(HomeSettings(home=tmp_path).keys_path).create("age", ["all"])
    api = start_serve(tmp_path, workers=1)
    try:
        dated = synced_headers(api.url, key)
        for path, stream in DATA_PATHS.items():
            assert dated[path] == format_datetime(first[stream]), path
        ready = httpx.get(f"{api.url}/readyz").json()
        assert ready["synced_at"] == {name: format_datetime(at) for name, at in first.items()}
        mirror = httpx.get(
            f"{api.url}/_ductwork/v1/changes/leads", headers={"Authorization": f"Bearer {key}"}
        )
        assert "x-synced-at" not in mirror.headers  # the mirror's own surface is not dated

        assert ductwork("sync", env=env).returncode == 0  # nothing changed upstream
        assert snapshots.current(folder).version == version  # confirmed, not published anew
        again = until_changed(api.url, key, dated)
        for path in DATA_PATHS:
            assert parse_datetime(again[path]) > parse_datetime(dated[path]), path
    finally:
        stop_serve(api)


def test_past_the_maximum_age_a_streams_paths_answer_503_in_its_style_and_readyz_fails(
    synced_home: Path, tmp_path: Path
) -> None:
    """A stream whose syncs have failed for two hours (its time is rewritten so) against a
    maximum age of one hour; the other streams keep answering."""
    from tests.conftest import home_with_published_snapshot

    home_with_published_snapshot(synced_home, tmp_path)
    folder = HomeSettings(home=tmp_path).snapshots_dir
    now = datetime.now(UTC)
    times = {stream.name: now for stream in STREAMS}
    sync_times.write(folder, times)
    key = KeyFile(HomeSettings(home=tmp_path).keys_path).create("age", ["all"])
    api = start_serve(tmp_path, workers=1, settings={"DUCTWORK_SERVE_MAX_AGE_S": "3600"})
    try:
        before = synced_headers(api.url, key)
        sync_times.write(folder, {**times, "leads": now - timedelta(hours=2)})
        deadline = time.monotonic() + SETTLE_LIMIT_S
        auth = {"Authorization": f"Bearer {key}"}
        while httpx.get(f"{api.url}{paths.LEADS}?count=2", headers=auth).status_code == 200:
            assert time.monotonic() < deadline, "the stale stream kept answering"
            time.sleep(0.1)  # polls; times nothing
        stale = httpx.get(f"{api.url}{paths.LEADS}?count=2", headers=auth)
        assert stale.status_code == 503 and stale.headers["retry-after"].isdigit()
        assert stale.headers["content-type"] == "application/problem+json"
        assert stale.json()["title"] == "Service Unavailable"
        assert stale.json()["syncedAt"] == format_datetime(now - timedelta(hours=2))
        keyless = httpx.get(f"{api.url}{paths.LEADS}/anything")
        assert keyless.status_code == 503  # before any key is looked at: it fails loudly
        for path, stream in DATA_PATHS.items():
            if stream != "leads":
                answer = httpx.get(api.url + path, headers=auth)
                assert answer.status_code == 200 and answer.headers["x-synced-at"] == before[path]
        ready = httpx.get(f"{api.url}/readyz")
        assert ready.status_code == 503
        assert ready.json()["status"] == "stale" and ready.json()["stale"] == ["leads"]
        assert httpx.get(f"{api.url}/healthz").status_code == 200  # alive, not ready
    finally:
        stop_serve(api)


def test_a_replica_copies_the_sync_times_with_the_pointer_and_leaves_out_a_forged_file(
    synced_home: Path, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """Through ``fetch_current``, the function a replica's follower calls every poll, against
    moto's S3 server; no serving replica runs here."""
    current = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
    assert current is not None
    s3 = S3Settings(s3_endpoint_url=object_store.endpoint_url)
    store = SnapshotStore.connect(f"s3://sync-times-{tmp_path.name.lower()[-20:]}/snap", s3)
    moment = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    store.publish(current, sync_times.encode({"products": moment}))
    replica = tmp_path / "replica"
    fetch_current(store, replica)
    assert sync_times.read(replica) == {"products": moment}
    later = moment + timedelta(minutes=15)
    store.publish(current, sync_times.encode({"products": later}))  # a confirm-only publish
    fetch_current(store, replica)
    assert sync_times.read(replica) == {"products": later}

    store.publish(current, b'{"streams": {"products": "not a time"}}')  # a hostile bucket
    fetch_current(store, replica)
    assert sync_times.read(replica) == {"products": later}  # the last good times kept


# Above the time from a stream's step to the publish and a server reading it, on two busy
# cores; the test waits for the failing stream's time to grow older than this.
MAX_AGE_S = 45


def first_answer(
    url: str, path: str, key: str, wanted: Callable[[httpx.Response], bool]
) -> httpx.Response:
    """GET ``path`` until its answer is ``wanted``; fails after the maximum age and the time
    a server takes to read new sync times."""
    deadline = time.monotonic() + MAX_AGE_S + SETTLE_LIMIT_S
    while True:
        answer = httpx.get(url + path, headers={"Authorization": f"Bearer {key}"})
        if wanted(answer):
            return answer
        assert time.monotonic() < deadline, (path, answer.status_code, answer.headers)
        time.sleep(0.1)  # polls; times nothing


def dated(moment: str) -> Callable[[httpx.Response], bool]:
    """Whether an answer carries ``X-Synced-At: moment``."""
    return lambda answer: answer.headers.get("x-synced-at") == moment


def test_a_stream_whose_upstream_fails_keeps_its_time_while_the_others_move_and_alone_goes_stale(
    object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """The lead list starts answering its first page whatever the cursor: ``ductwork sync``
    fails that stream's step and publishes nothing, and a sync of the other streams then
    publishes. Leads keep the time of the last sync that read them, the others move; with
    ``DUCTWORK_SERVE_MAX_AGE_S`` the leads' paths alone answer 503, in the CRM family's
    Problem style, once that time is older than the bound."""
    others = [asset for stream in STREAMS if stream.name != "leads" for asset in stream.assets]
    with object_store.sandbox(6060, "tiny") as upstream:
        env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
        synced = ductwork("sync", env=env)
        assert synced.returncode == 0, synced.stdout[-3000:]
        folder = HomeSettings(home=tmp_path).snapshots_dir
        first = sync_times.read(folder)
        key = KeyFile(HomeSettings(home=tmp_path).keys_path).create("age", ["all"])
        plain = start_serve(tmp_path, workers=1)
        bound = {"DUCTWORK_SERVE_MAX_AGE_S": str(MAX_AGE_S)}
        strict = start_serve(tmp_path, 1, bound, until="answering")  # maybe stale already
        try:
            before = synced_headers(plain.url, key)
            upstream.state.faults = Faults(loop_cursor=True)
            failed = ductwork("sync", env=env)
            rest = ductwork("sync", *(part for a in others for part in ("--select", a)), env=env)
            after = until_changed(plain.url, key, before, kept="leads")
            ready_plain = httpx.get(f"{plain.url}/readyz").json()

            stale = first_answer(
                strict.url, f"{paths.LEADS}?count=2", key, lambda found: found.status_code != 200
            )
            # The others, synced since, still answer, dated as the server without a bound
            # dates them.
            fresh = {
                path: first_answer(strict.url, path, key, dated(after[path]))
                for path, stream in DATA_PATHS.items()
                if stream != "leads"
            }
            ready = httpx.get(f"{strict.url}/readyz")
        finally:
            upstream.state.faults = Faults()
            stop_serve(plain)
            stop_serve(strict)

    assert failed.returncode == 1, failed.stdout[-3000:]
    failures = [line for line in failed.stdout.splitlines() if line.startswith("  FAILED ")]
    refusal = f"  FAILED crm_leads: GET {paths.LEADS}: refused, the cursor does not move forward"
    assert len(failures) == 1 and failures[0].startswith(refusal), failed.stdout[-3000:]
    assert rest.returncode == 0, rest.stdout[-3000:]
    times = sync_times.read(folder)
    assert times["leads"] == first["leads"]
    assert all(times[name] > first[name] for name in times if name != "leads"), times
    for path, stream in DATA_PATHS.items():
        if stream == "leads":
            assert after[path] == before[path] == format_datetime(first["leads"]), path
        else:
            assert parse_datetime(after[path]) > parse_datetime(before[path]), path
    assert ready_plain["synced_at"]["leads"] == format_datetime(first["leads"])

    assert stale.status_code == 503 and stale.headers["retry-after"].isdigit()
    assert stale.headers["content-type"] == "application/problem+json"  # as the CRM family's
    problem = stale.json()
    assert problem["status"] == 503 and problem["instance"] == paths.LEADS
    assert problem["syncedAt"] == format_datetime(first["leads"])
    assert all(answer.status_code == 200 for answer in fresh.values())
    assert ready.status_code == 503
    assert ready.json()["status"] == "stale" and ready.json()["stale"] == ["leads"]
