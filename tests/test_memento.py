"""The past speaks Memento (RFC 7089), through ``ductwork serve`` over a data folder that
``ductwork sync`` published twice (the upstream's digital assets changed in between):

- every answer of a spec path varies by ``Accept-Datetime``, beside the gzip layer's
  ``Accept-Encoding``; present answers link their TimeMap and name themselves their TimeGate;
  mementos link the original, the TimeMap and themselves with their datetime;
- the TimeMap lists a memento per publish kept, in link-format and JSON, under the spec path's
  own scope; ``/publishes`` tells each publish's changes for the streams a key may read;
- ``Accept-Datetime`` never reaches the image sync's trigger;
- answers of the past are neither dated nor refused for a stale mirror.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS, PIM_IMAGE_SYNC
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.snapshots import sync_times
from ductwork.streams.registry import INDOOR_MODELS, PAIRINGS, STREAMS
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer, home_with_published_snapshot
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import RunningApi, serving_process, start_serve, stop_serve
from tests.helpers.sync import mutate

# Two syncs of a tiny upstream, charged to the first test.
pytestmark = pytest.mark.timeout(600)

TIMEMAP = "/_ductwork/v1/timemap"
PUBLISHES = "/_ductwork/v1/publishes"
AT = "/_ductwork/v1/at"
LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[a-z]+="[^"]*")*)')
PARAM = re.compile(r'([a-z]+)="([^"]*)"')
ASSETS_CHANGED = 3


def links(value: str) -> list[tuple[str, dict[str, str]]]:
    """A ``Link`` header or link-format body: each target with its parameters."""
    return [(uri, dict(PARAM.findall(params))) for uri, params in LINK.findall(value)]


def by_rel(value: str) -> dict[str, tuple[str, dict[str, str]]]:
    """The links of ``value`` by each relation type they carry."""
    found = {}
    for uri, params in links(value):
        for rel in params.get("rel", "").split():
            found[rel] = (uri, params)
    return found


def varies_by(answer: httpx.Response) -> list[str]:
    """The request headers ``answer`` says it varies by, in lower case, over every Vary line."""
    return [part.strip().lower() for part in answer.headers.get_list("vary", split_commas=True)]


class TriggerRecorder(http.server.BaseHTTPRequestHandler):
    """Stands in for the Dagster webserver: counts what reaches it and answers 500."""

    calls = 0

    def do_POST(self) -> None:
        type(self).calls += 1
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def published_twice(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> dict:
    """A data folder after a full sync and a sync of the digital assets, some of which changed
    upstream in between; the two versions, and keys of every scope and of ``crm`` alone."""
    home = tmp_path_factory.mktemp("memento")
    folder = HomeSettings(home=home).snapshots_dir
    with object_store.sandbox(91, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        first = ductwork("sync", env=env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        first_version = snapshots.current(folder).version
        mutate(upstream, assets_updated=ASSETS_CHANGED)
        second = ductwork("sync", "--select", "warehouse_digital_assets", env=env)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    keys = KeyFile(HomeSettings(home=home).keys_path)
    return {
        "home": home,
        "versions": [first_version, snapshots.current(folder).version],
        "key": keys.create("memento-all", ["all"]),
        "crm": keys.create("memento-crm", ["crm"]),
        "assets": keys.create("memento-assets", ["stream:digital-assets"]),
    }


@pytest.fixture(scope="module")
def api(published_twice: dict) -> Iterator[RunningApi]:
    """``ductwork serve`` over the folder, its image-sync trigger pointed at a recorder."""
    recorder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TriggerRecorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    dagster = f"http://127.0.0.1:{recorder.server_address[1]}"
    try:
        with serving_process(
            published_twice["home"], 1, {"DUCTWORK_DAGSTER_URL": dagster}
        ) as running:
            yield running
    finally:
        recorder.shutdown()
        recorder.server_close()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_every_answer_of_a_spec_path_varies_by_accept_datetime_beside_accept_encoding(
    api: RunningApi, published_twice: dict
) -> None:
    headers = {**auth(published_twice["key"]), "Accept-Encoding": "gzip"}
    page = f"{api.url}{PAIRINGS.path}?count=50"  # large enough to be compressed
    present = httpx.get(page, headers=headers)
    moment = "Tue, 01 Dec 2099 00:00:00 GMT"  # after the newest publish: that publish answers
    past = httpx.get(page, headers={**headers, "Accept-Datetime": moment})
    unchanged = httpx.get(page, headers={**headers, "If-None-Match": present.headers["etag"]})
    missing = httpx.get(f"{api.url}/products/v2.0/units/NO-SUCH-SKU", headers=headers)
    keyless = httpx.get(f"{api.url}{PAIRINGS.path}", headers={"Accept-Datetime": moment})
    assert present.headers["content-encoding"] == past.headers["content-encoding"] == "gzip"
    assert (present.status_code, past.status_code, unchanged.status_code) == (200, 200, 304)
    assert (missing.status_code, keyless.status_code) == (404, 401)
    for answer in (present, past):  # one Vary, both names: merged, not overwritten
        assert varies_by(answer) == ["accept-datetime", "accept-encoding"], answer.headers
        assert len(answer.headers.get_list("vary")) == 1
    for answer in (unchanged, missing, keyless):
        assert "accept-datetime" in varies_by(answer), answer.headers
    memento = httpx.get(f"{api.url}{AT}/{published_twice['versions'][0]}{PAIRINGS.path}")
    assert "accept-datetime" not in varies_by(memento)  # its URI fixes its time


def test_a_present_answer_links_its_timemap_and_is_its_own_timegate(
    api: RunningApi, published_twice: dict
) -> None:
    asked = f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?count=2&page=1"
    present = httpx.get(api.url + asked, headers=auth(published_twice["key"]))
    assert present.status_code == 200 and "memento-datetime" not in present.headers
    rels = by_rel(present.headers["link"])
    assert rels["original"][0] == rels["timegate"][0] == asked
    assert rels["timemap"] == (
        f"{TIMEMAP}{asked}",
        {"rel": "timemap", "type": "application/link-format"},
    )
    assert "memento" not in rels and "content-location" not in present.headers


def test_a_memento_links_the_original_the_timemap_and_itself_with_its_datetime(
    api: RunningApi, published_twice: dict
) -> None:
    first = published_twice["versions"][0]
    sku = "A B/+#é"  # escaped in the path as a client sends it, and so in the links
    asked = f"/products/v2.0/units/{quote(sku, safe='')}"
    headers = auth(published_twice["key"])
    by_version = httpx.get(f"{api.url}{AT}/{first}{asked}", headers=headers)
    moment = by_version.headers["memento-datetime"]
    negotiated = httpx.get(api.url + asked, headers={**headers, "Accept-Datetime": moment})
    when = parsedate_to_datetime(moment).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.999Z")
    by_date = httpx.get(f"{api.url}{AT}/{when}{asked}", headers=headers)
    memento = f"{AT}/{first}{asked}"
    for answer in (by_version, negotiated, by_date):
        assert answer.status_code == 404  # no such unit, then as now
        assert answer.headers["memento-datetime"] == moment
        rels = by_rel(answer.headers["link"])
        assert rels["original"][0] == rels["timegate"][0] == asked
        assert rels["timemap"][0] == f"{TIMEMAP}{asked}"
        assert rels["memento"] == (memento, {"rel": "memento", "datetime": moment})
    assert "content-location" not in by_version.headers  # asked for by its own URI
    assert negotiated.headers["content-location"] == by_date.headers["content-location"] == memento


def test_a_target_too_long_to_link_is_answered_without_a_link_as_the_upstream_answers_it(
    api: RunningApi, published_twice: dict
) -> None:
    headers = auth(published_twice["key"])
    long_sku = "S" * 6000
    answer = httpx.get(f"{api.url}/products/v2.0/units/{long_sku}", headers=headers)
    assert answer.status_code == 404
    assert "link" not in answer.headers  # three copies would pass a client's 8 KiB header line
    assert "accept-datetime" in varies_by(answer)
    short = httpx.get(f"{api.url}/products/v2.0/units/{'S' * 100}", headers=headers)
    assert short.status_code == 404 and "link" in short.headers


def test_the_timemap_lists_one_memento_per_publish_kept_in_link_format_and_json(
    api: RunningApi, published_twice: dict
) -> None:
    first, second = published_twice["versions"]
    asked = f"{DATA_WAREHOUSE_DIGITAL_ASSETS}?count=1000"
    headers = auth(published_twice["key"])
    as_links = httpx.get(f"{api.url}{TIMEMAP}{asked}", headers=headers)
    as_json = httpx.get(
        f"{api.url}{TIMEMAP}{asked}", headers={**headers, "Accept": "application/json"}
    )
    again = httpx.get(
        f"{api.url}{TIMEMAP}{asked}", headers={**headers, "If-None-Match": as_links.headers["etag"]}
    )
    assert as_links.status_code == as_json.status_code == 200 and again.status_code == 304
    assert as_links.headers["content-type"] == "application/link-format"
    assert "accept" in varies_by(as_links)
    entries = links(as_links.text)
    (original, _), (self_uri, span) = entries[:2]
    assert original == asked and entries[0][1]["rel"] == "original timegate"
    assert self_uri == f"{TIMEMAP}{asked}" and span["rel"] == "self"
    mementos = entries[2:]
    assert [uri for uri, _ in mementos] == [f"{AT}/{v}{asked}" for v in (first, second)]
    assert [p["rel"] for _, p in mementos] == ["first memento", "last memento"]
    assert (span["from"], span["until"]) == (mementos[0][1]["datetime"], mementos[1][1]["datetime"])
    bodies = []
    for uri, params in mementos:  # each memento answers with the datetime its TimeMap names
        answer = httpx.get(api.url + uri, headers=headers)
        assert answer.headers["memento-datetime"] == params["datetime"]
        bodies.append(answer.json())
    assert bodies[0] != bodies[1]  # the assets changed between the two
    listed = as_json.json()
    assert listed["original"] == listed["timegate"] == asked
    assert [m["version"] for m in listed["mementos"]] == [first, second]
    assert [m["uri"] for m in listed["mementos"]] == [uri for uri, _ in mementos]
    for memento, (_, params) in zip(listed["mementos"], mementos, strict=True):
        stated = datetime.strptime(memento["datetime"], "%Y-%m-%dT%H:%M:%S.%f%z")
        assert stated.replace(microsecond=0) == parsedate_to_datetime(params["datetime"])
    assert (listed["from"], listed["until"]) == (
        listed["mementos"][0]["datetime"],
        listed["mementos"][-1]["datetime"],
    )


@pytest.mark.parametrize(
    ("key_name", "path", "status"),
    [
        ("key", f"{PAIRINGS.path}?count=5", 200),
        ("crm", f"{LEADS}?count=5", 200),
        ("crm", f"{PAIRINGS.path}?count=5", 403),  # it cannot read the path: nor its TimeMap
        ("crm", DATA_WAREHOUSE_DIGITAL_ASSETS, 403),
        ("assets", DATA_WAREHOUSE_DIGITAL_ASSETS, 200),  # by its stream's own scope
        ("assets", f"{LEADS}?count=5", 403),
        ("crm", INDOOR_MODELS.path, 200),  # served without a key: any key reads its TimeMap
        (None, f"{LEADS}?count=5", 401),
        ("key", "/products/v2.0/no-such-list", 404),
        ("key", "/nowhere", 404),
        ("key", PIM_IMAGE_SYNC, 404),  # a trigger has no past
    ],
)  # fmt: skip
def test_a_timemap_needs_its_spec_paths_scope_and_an_unknown_path_is_a_404_problem(
    api: RunningApi, published_twice: dict, key_name: str | None, path: str, status: int
) -> None:
    headers = auth(published_twice[key_name]) if key_name else {}
    answer = httpx.get(f"{api.url}{TIMEMAP}{path}", headers=headers)
    assert answer.status_code == status, answer.text
    if status != 200:
        assert answer.headers["content-type"] == "application/problem+json"
        problem = {401: "unauthorized", 403: "forbidden", 404: "not-found"}[status]
        assert answer.json()["type"] == f"/problems/{problem}"


def test_publishes_tell_each_publishs_changes_for_the_streams_the_key_may_read(
    api: RunningApi, published_twice: dict
) -> None:
    first, second = published_twice["versions"]
    every = httpx.get(api.url + PUBLISHES, headers=auth(published_twice["key"]))
    crm_only = httpx.get(api.url + PUBLISHES, headers=auth(published_twice["crm"]))
    nobody = httpx.get(api.url + PUBLISHES)
    assert every.status_code == crm_only.status_code == 200
    assert nobody.status_code == 401
    listed = every.json()
    assert listed["snapshot"] == second
    assert [p["version"] for p in listed["publishes"]] == [first, second]
    assert listed["publishes"][0]["changes"] is None  # where the history starts
    changed = listed["publishes"][1]["changes"]
    assert changed == {"digital-assets": {"upsert": ASSETS_CHANGED, "delete": 0}}
    assert {stream.name for stream in STREAMS} >= set(changed)
    assert [p["changes"] for p in crm_only.json()["publishes"]] == [None, {}]
    by_stream = httpx.get(api.url + PUBLISHES, headers=auth(published_twice["assets"])).json()
    assert [p["changes"] for p in by_stream["publishes"]] == [None, changed]
    timemap = httpx.get(
        f"{api.url}{TIMEMAP}{LEADS}",
        headers={**auth(published_twice["crm"]), "Accept": "application/json"},
    ).json()
    assert [m["datetime"] for m in timemap["mementos"]] == [
        p["publishedAt"] for p in listed["publishes"]
    ]


def test_accept_datetime_never_reaches_the_image_sync_trigger(
    api: RunningApi, published_twice: dict
) -> None:
    headers = auth(published_twice["key"])
    before = TriggerRecorder.calls
    refused = httpx.get(
        api.url + PIM_IMAGE_SYNC,
        headers={**headers, "Accept-Datetime": "Tue, 01 Dec 2099 00:00:00 GMT"},
    )
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "/problems/invalid-parameter"
    assert TriggerRecorder.calls == before
    present = httpx.get(api.url + PIM_IMAGE_SYNC, headers=headers)
    assert present.status_code == 503  # the recorder answered 500: it was reached this time
    assert TriggerRecorder.calls > before


def test_answers_of_the_past_are_neither_dated_nor_refused_when_the_mirror_is_stale(
    published_twice: dict, tmp_path: Path
) -> None:
    """Every stream last synced two hours ago, against a maximum age of one hour."""
    home_with_published_snapshot(published_twice["home"], tmp_path)
    folder = HomeSettings(home=tmp_path).snapshots_dir
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    sync_times.write(folder, {stream.name: long_ago for stream in STREAMS})
    key = KeyFile(HomeSettings(home=tmp_path).keys_path).create("stale", ["all"])
    headers = auth(key)
    first, second = published_twice["versions"]
    asked = f"{LEADS}?count=2"
    # Stale from the start, so never ready: waited for until it answers (the snapshot is loaded
    # before it does).
    settings = {"DUCTWORK_SERVE_MAX_AGE_S": "3600"}
    stale = start_serve(tmp_path, 1, settings, until="answering")
    try:
        present = httpx.get(stale.url + asked, headers=headers)
        now = datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
        negotiated = httpx.get(stale.url + asked, headers={**headers, "Accept-Datetime": now})
        rebuilt = httpx.get(f"{stale.url}{AT}/{first}{asked}", headers=headers)
        current = httpx.get(f"{stale.url}{AT}/{second}{asked}", headers=headers)
        ready = httpx.get(f"{stale.url}/readyz")
    finally:
        stop_serve(stale)
    assert ready.status_code == 503 and ready.json()["status"] == "stale"
    assert present.status_code == 503 and "accept-datetime" in varies_by(present)
    assert present.headers["content-type"] == "application/problem+json"
    for answer, version in ((negotiated, second), (rebuilt, first), (current, second)):
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-snapshot-version"] == version
        assert "memento-datetime" in answer.headers
        assert "x-synced-at" not in answer.headers
