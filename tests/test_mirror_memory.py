"""The mirror remembers, on the path users run: ``ductwork sync`` against the sandbox, then
``ductwork serve``. After a full sync every stream's changes feed holds exactly the upstream's
records; after the upstream changes and a reconciling sync, the feed from the earlier token
holds exactly the net change, records included; and the ``/at/`` base for the earlier snapshot
answers every path exactly as the upstream did before it changed (from the snapshot file while
the data folder keeps it, and rebuilt from the history once it is gone).

Also through ``ductwork serve``: NDJSON, a long poll woken by a publish, tokens that outlive a
restart and hold on a replica fed by the object store, and bad tokens and instants (400).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS, PRODUCTS_LIST
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.streams.registry import (
    CONTRACTORS,
    INDOOR_MODELS,
    MANUALS,
    PAIRINGS,
    STREAMS,
    SUBMITTALS,
)
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import all_assets, all_pages, get_json, mirror_requests
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.feed import CHANGES, walk_feed
from tests.helpers.serve_process import RunningApi, serving_process
from tests.helpers.sync import mutate

# The module's shared fixture (two whole syncs, a server walking every feed, and every upstream
# record read twice) is charged to its first test: more than the suite's 300 s on a slow
# machine, though still bounded.
pytestmark = pytest.mark.timeout(900)

CHANGED = {
    "assets_updated": 25, "assets_deleted": 10, "assets_added": 15,
    "leads_changed": 30, "leads_added": 12, "products_changed": 6,
}  # fmt: skip
Records = dict[str, dict[str, object]]


def upstream_records(upstream: SandboxHandle) -> dict[str, Records]:
    """What the upstream holds, stream by stream, keyed as the changes feed keys it, each record
    as the upstream's single-record form serves it."""

    catalog = [
        item
        for p, q in all_pages(upstream, PRODUCTS_LIST, 1000)
        for item in get_json(upstream, p, **q)["data"]
    ]
    pairings = [
        pairing
        for p, q in all_pages(upstream, PAIRINGS.path, 1000)
        for pairing in get_json(upstream, p, **q)["data"]["pairings"]
    ]
    lead_ids: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        page = get_json(upstream, LEADS, count=1000, **cursor)["data"]
        lead_ids += [lead["Id"] for lead in page]
        if len(page) < 1000:
            break
        cursor = {"cursorCreatedDate": page[-1]["CreatedDate"], "cursorId": page[-1]["Id"]}
    submittals = {}
    for idu, odu in upstream.state.submittals:
        query = {name: value for name, value in (("idu", idu), ("odu", odu)) if value}
        submittals[f"{idu or ''}|{odu or ''}"] = get_json(upstream, SUBMITTALS.path, **query)[
            "data"
        ]
    indoor_models: Records = {}
    for model in get_json(upstream, INDOOR_MODELS.path)["data"]:
        indoor_models.setdefault(model["sku"], model)
    return {
        "products": {
            item["sku"]: get_json(upstream, f"/products/v2.0/units/{quote(item['sku'], safe='')}")[
                "data"
            ]
            for item in catalog
        },
        "pairings": {str(p["relationshipId"]): p for p in pairings},
        "digital-assets": {a["assetId"]: a for a in all_assets(upstream)},
        "submittals": submittals,
        "leads": {i: get_json(upstream, f"{LEADS}/{quote(i, safe='')}") for i in lead_ids},
        "contractors": {
            c["contractorId"]: c
            for c in json.loads(get_json(upstream, CONTRACTORS.path)["data"] or "[]")
        },
        "indoor-models": indoor_models,
        "manuals": {m["key"]: m for m in get_json(upstream, MANUALS.path)["data"]},
    }


def walk(api: RunningApi, key: str, stream: str, since: str | None) -> tuple[list[dict], str]:
    """A whole walk of the stream's feed from ``since``: its changes, and the next token."""
    return walk_feed(api.url, key, stream, since)


def applied(changes: list[dict], start: Records | None = None) -> Records:
    held = dict(start or {})
    for change in changes:
        if change["op"] == "delete":
            held.pop(change["key"], None)
        else:
            held[change["key"]] = change["record"]
    return held


def capture(upstream: SandboxHandle, requests: list) -> list[tuple[str, dict, int, object]]:
    """Each request's answer from the upstream: path, query, status and JSON body."""
    found = []
    for path, query in requests:
        answer = httpx.get(
            upstream.url + path,
            params={k: str(v) for k, v in query.items()},
            headers={"Authorization": f"Bearer {upstream.api_key}"},
            timeout=60,
        )
        found.append((path, query, answer.status_code, answer.json()))
    return found


@pytest.fixture(scope="module")
def remembered(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict]:
    """A data folder synced twice by ``ductwork sync``, the upstream changed in between: what
    the upstream held and answered before and after, and the tokens of the first feed walks."""
    home = tmp_path_factory.mktemp("memory")
    with object_store.sandbox(83, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        first = ductwork("sync", env=env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        before = upstream_records(upstream)
        lookups = [(f"{LEADS}/{quote(i, safe='')}", {}) for i in list(before["leads"])[:20]]
        lookups += [
            (f"/products/v2.0/units/{quote(s, safe='')}", {}) for s in list(before["products"])[:20]
        ]
        answers_before = capture(upstream, [*mirror_requests(upstream), *lookups])
        key = KeyFile(HomeSettings(home=home).keys_path).create("memory", ["all"])
        with serving_process(home, 1) as api:
            loads_before = {s.name: walk(api, key, s.name, None) for s in STREAMS}
        first_version = snapshots.current(HomeSettings(home=home).snapshots_dir).version
        mutate(upstream, **CHANGED)
        second = ductwork("sync", "--reconcile", env=env)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        after = upstream_records(upstream)
        yield {
            "home": home, "key": key, "before": before, "after": after,
            "answers_before": answers_before, "loads": loads_before,
            "first_version": first_version, "upstream": upstream, "env": env,
        }  # fmt: skip


def test_after_a_full_sync_each_streams_feed_holds_exactly_the_upstreams_records(
    remembered: dict,
) -> None:
    for stream in STREAMS:
        changes, _ = remembered["loads"][stream.name]
        assert {c["op"] for c in changes} <= {"upsert"}, stream.name
        assert applied(changes) == remembered["before"][stream.name], stream.name


def test_the_feed_from_the_earlier_token_holds_exactly_the_net_change(remembered: dict) -> None:
    before, after = remembered["before"], remembered["after"]
    with serving_process(remembered["home"], 1) as api:
        for stream in STREAMS:
            _, token = remembered["loads"][stream.name]
            changes, _ = walk(api, remembered["key"], stream.name, token)
            keys = [c["key"] for c in changes]
            assert len(keys) == len(set(keys)), stream.name
            differing = {
                k for k in before[stream.name].keys() | after[stream.name].keys()
                if before[stream.name].get(k) != after[stream.name].get(k)
            }  # fmt: skip
            assert set(keys) == differing, stream.name
            assert applied(changes, before[stream.name]) == after[stream.name], stream.name


def test_the_earlier_snapshot_answers_every_path_as_the_upstream_did_before_it_changed(
    remembered: dict,
) -> None:
    home, version = remembered["home"], remembered["first_version"]
    snapshots_dir = HomeSettings(home=home).snapshots_dir
    headers = {"Authorization": f"Bearer {remembered['key']}"}
    kept = snapshots_dir / f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    for rebuilt in (False, True):
        if rebuilt:
            kept.unlink()  # the data folder no longer keeps it: rebuilt from the history
        with serving_process(home, 1) as api, httpx.Client(headers=headers, timeout=60) as client:
            for path, query, status, body in remembered["answers_before"]:
                answer = client.get(
                    f"{api.url}/_ductwork/v1/at/{version}{path}",
                    params={k: str(v) for k, v in query.items()},
                )
                assert (answer.status_code, answer.json()) == (status, body), (path, query)
                assert answer.headers["x-snapshot-version"] == version
                assert answer.headers["cache-control"] == "private, immutable"
                assert answer.headers["memento-datetime"].endswith("GMT")
    assert (snapshots_dir / ".past").is_dir()


def caught_up_token(api: RunningApi, key: str, stream: str, remembered: dict) -> str:
    """A token that names the current snapshot for ``stream``."""
    return walk(api, key, stream, remembered["loads"][stream][1])[1]


def test_ndjson_streams_the_same_walk_one_object_a_line_with_next_last(remembered: dict) -> None:
    key = remembered["key"]
    ndjson = {"Authorization": f"Bearer {key}", "Accept": "application/x-ndjson"}
    with serving_process(remembered["home"], 1) as api, httpx.Client() as client:  # gzip asked
        ask = f"{api.url}{CHANGES}leads"
        # Each format twice: the second of each is the page the worker kept (and compressed),
        # which must stay in its own format.
        json_answers = [
            client.get(ask, params={"limit": 40}, headers={"Authorization": f"Bearer {key}"})
            for _ in range(2)
        ]
        line_answers = [client.get(ask, params={"limit": 40}, headers=ndjson) for _ in range(2)]
    as_json, as_lines = json_answers[0].json(), line_answers[0]
    assert as_lines.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in as_lines.text.splitlines()]
    assert lines[:-1] == as_json["changes"]
    assert lines[-1] == {"next": as_json["next"], "hasMore": True}
    assert json_answers[1].content == json_answers[0].content
    assert line_answers[1].content == as_lines.content
    assert line_answers[1].headers["content-type"].startswith("application/x-ndjson")
    version = snapshots.current(HomeSettings(home=remembered["home"]).snapshots_dir).version
    for answer in [*json_answers, *line_answers]:
        assert answer.headers["content-encoding"] == "gzip"
        assert answer.headers["x-snapshot-version"] == version


def test_a_long_poll_is_woken_by_a_publish_and_brings_what_it_changed(remembered: dict) -> None:
    key, upstream = remembered["key"], remembered["upstream"]
    outcome: dict[str, object] = {}
    with serving_process(remembered["home"], 1) as api:
        token = caught_up_token(api, key, "digital-assets", remembered)

        def long_poll() -> None:
            started = time.monotonic()
            outcome["answer"] = httpx.get(
                f"{api.url}{CHANGES}digital-assets", params={"since": token, "wait": 60},
                headers={"Authorization": f"Bearer {key}"}, timeout=120,
            )  # fmt: skip
            outcome["seconds"] = time.monotonic() - started

        waiting = threading.Thread(target=long_poll)
        waiting.start()
        touched = set(mutate(upstream, assets_updated=3)["assets_updated"])
        synced = ductwork("sync", "--select", "warehouse_digital_assets", env=remembered["env"])
        assert synced.returncode == 0, synced.stdout[-2000:]
        waiting.join(timeout=120)
    answer = outcome["answer"]
    assert isinstance(answer, httpx.Response) and answer.status_code == 200
    assert {change["key"] for change in answer.json()["changes"]} == touched
    assert outcome["seconds"] < 60  # woken by the publish, not by the wait running out


def test_a_token_holds_after_a_restart_and_on_a_replica_fed_by_the_object_store(
    remembered: dict, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    from ductwork.settings import S3Settings
    from ductwork.snapshots.store import SnapshotStore

    key, home = remembered["key"], remembered["home"]
    _, first_token = remembered["loads"]["digital-assets"]
    with serving_process(home, 1) as api:
        here, _ = walk(api, key, "digital-assets", first_token)
    with serving_process(home, 1) as restarted:
        again, _ = walk(restarted, key, "digital-assets", first_token)
    store = "s3://ductwork-memory-replica/snapshots"
    s3 = S3Settings(s3_endpoint_url=object_store.endpoint_url, s3_bucket=object_store.bucket)
    current = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert current is not None
    SnapshotStore.connect(store, s3).publish(current)
    replica = {
        "DUCTWORK_SNAPSHOT_STORE": store,
        "DUCTWORK_S3_ENDPOINT_URL": object_store.endpoint_url,
        "DUCTWORK_API_KEYS_FILE": str(HomeSettings(home=home).keys_path),
    }
    with serving_process(tmp_path / "replica", 1, replica) as elsewhere:
        there, _ = walk(elsewhere, key, "digital-assets", first_token)
    assert here and here == again == there


AT = "/_ductwork/v1/at"


@pytest.mark.parametrize(
    ("path", "query", "status", "problem"),
    [
        (f"{CHANGES}leads", {"since": "not-a-token"}, 400, "invalid-parameter"),
        (f"{CHANGES}leads", {"since": "eyJmIjoxfQ.00"}, 400, "invalid-parameter"),
        (f"{CHANGES}leads", {"limit": "0"}, 400, "invalid-parameter"),
        (f"{CHANGES}leads", {"limit": "10001"}, 400, "invalid-parameter"),
        (f"{CHANGES}leads", {"wait": "61"}, 400, "invalid-parameter"),
        (f"{CHANGES}no-such-stream", {}, 404, "not-found"),
        (f"{AT}/yesterday/products/v2.0/products", {}, 400, "invalid-parameter"),
        (f"{AT}/2026-13-45T00:00:00Z/products/v2.0/products", {}, 400, "invalid-parameter"),
        (f"{AT}/20000101T000000000000Z-abcdef/products/v2.0/products", {}, 410,
         "history-unavailable"),
        (f"{AT}/1999-01-01T00:00:00Z/crm/v1.1/leads", {}, 410, "history-unavailable"),
        (f"{AT}/2099-01-01T00:00:00Z/nowhere", {}, 404, "not-found"),
    ],
)  # fmt: skip
def test_bad_tokens_and_instants_are_problems_never_a_500(
    remembered: dict, path: str, query: dict, status: int, problem: str
) -> None:
    with serving_process(remembered["home"], 1) as api:
        answer = httpx.get(
            f"{api.url}{path}", params=query,
            headers={"Authorization": f"Bearer {remembered['key']}"},
        )  # fmt: skip
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == f"/problems/{problem}"
    if status == 410:
        assert answer.json()["oldest"].endswith("Z")


def test_accept_datetime_on_a_spec_path_answers_from_the_publish_current_then(
    remembered: dict,
) -> None:
    home, version = remembered["home"], remembered["first_version"]
    headers = {"Authorization": f"Bearer {remembered['key']}"}
    with serving_process(home, 1) as api:
        past = httpx.get(f"{api.url}{AT}/{version}{DATA_WAREHOUSE_DIGITAL_ASSETS}", headers=headers)
        moment = past.headers["memento-datetime"]
        same = httpx.get(
            f"{api.url}{DATA_WAREHOUSE_DIGITAL_ASSETS}",
            headers={**headers, "Accept-Datetime": moment},
        )
        now = httpx.get(f"{api.url}{DATA_WAREHOUSE_DIGITAL_ASSETS}", headers=headers)
    assert same.json() == past.json() != now.json()
    assert same.headers["memento-datetime"] == past.headers["memento-datetime"]
    assert "memento-datetime" not in now.headers
