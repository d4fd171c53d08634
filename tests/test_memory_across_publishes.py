"""The mirror's memory across three publishes, as users reach it: ``ductwork sync`` against a
sandbox changed through its admin API between syncs, then ``ductwork diff``, ``ductwork
changes`` and ``ductwork serve``.

What each mutation changed is known exactly (the sandbox answers the ids it touched, and the
upstream's records are read before and after), so ``ductwork diff`` must count exactly those
records and members, for any two publishes, in both formats and for one stream. The past by
date-time answers from the publish current then (the earlier one, between two publishes; the
newest, after it), through ``/_ductwork/v1/at/<date-time>/`` and ``Accept-Datetime`` alike. The
changes feed and the past answer ``If-None-Match`` with a 304 naming the ETag the first answer
gave, and a changed answer with its new body.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime as http_date
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.encoding import format_datetime, parse_datetime
from ductwork.contract.paths import LEADS, PRODUCTS_LIST
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.streams.registry import PAIRINGS, STREAMS
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import all_assets, all_pages, get_json
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import RunningApi, serving_process
from tests.helpers.sync import mutate

# What changes upstream before the second sync, and before the third. The second mutation
# drifts the products' schema: a member appears and another changes its JSON type.
FIRST = {
    "assets_deleted": 3, "assets_updated": 4, "assets_added": 5,
    "products_changed": 2, "leads_added": 2,
}  # fmt: skip
SECOND = {"assets_deleted": 2, "assets_updated": 6, "products_drifted": 3, "leads_changed": 3}
CHANGED_STREAMS = ("products", "digital-assets", "leads")
AT = "/_ductwork/v1/at"
CHANGES = "/_ductwork/v1/changes/"
Records = dict[str, dict]


@dataclass(frozen=True)
class Published:
    """One publish: its version and time, what the upstream held then (the streams the
    mutations change), the stream ``digital-assets``'s feed token caught up to it, and the ids
    the mutation before it touched (none before the first)."""

    version: str
    at: datetime
    held: dict[str, Records]
    token: str
    touched: dict[str, set[str]]


@dataclass(frozen=True)
class History:
    home: Path
    env: dict[str, str]
    key: str
    publishes: list[Published]


def upstream_held(upstream: SandboxHandle) -> dict[str, Records]:
    """The upstream's records of the streams the mutations change, keyed as the feed keys them,
    each as the stream's record (the single-record form's JSON)."""
    catalog = [
        item
        for path, query in all_pages(upstream, PRODUCTS_LIST, 1000)
        for item in get_json(upstream, path, **query)["data"]
    ]
    lead_ids: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        page = get_json(upstream, LEADS, count=1000, **cursor)["data"]
        lead_ids += [lead["Id"] for lead in page]
        if len(page) < 1000:
            break
        cursor = {"cursorCreatedDate": page[-1]["CreatedDate"], "cursorId": page[-1]["Id"]}
    return {
        "products": {
            item["sku"]: get_json(upstream, unit_path(item["sku"]))["data"] for item in catalog
        },
        "digital-assets": {asset["assetId"]: asset for asset in all_assets(upstream)},
        "leads": {i: get_json(upstream, f"{LEADS}/{quote(i, safe='')}") for i in lead_ids},
    }


def unit_path(sku: str) -> str:
    return f"/products/v2.0/units/{quote(sku, safe='')}"


KEPT = "SELECT version, published_at FROM history.publishes ORDER BY seq"


def caught_up_token(env: dict[str, str]) -> str:
    """The token ``ductwork changes digital-assets`` prints after the whole walk."""
    done = ductwork("changes", "digital-assets", "--limit", "10000", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def history(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[History]:
    """A data folder published three times by ``ductwork sync`` (reconciling after the
    first), the upstream changed by ``FIRST`` and ``SECOND`` in between."""
    home = tmp_path_factory.mktemp("three-publishes")
    folder = HomeSettings(home=home).snapshots_dir
    found: list[tuple[str, dict[str, Records], str, dict[str, set[str]]]] = []
    with object_store.sandbox(3131, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        for mutation in (None, FIRST, SECOND):
            touched = {} if mutation is None else mutate(upstream, **mutation)
            reconcile = [] if mutation is None else ["--reconcile"]  # deletions are learned so
            synced = ductwork("sync", *reconcile, env=env)
            assert synced.returncode == 0, synced.stdout[-3000:] + synced.stderr[-3000:]
            current = snapshots.current(folder)
            assert current is not None
            touched_sets = {kind: set(ids) for kind, ids in touched.items()}
            found.append(
                (current.version, upstream_held(upstream), caught_up_token(env), touched_sets)
            )
    listed = ductwork("sql", KEPT, "--format", "json", env=env)
    assert listed.returncode == 0, listed.stderr[-2000:]
    kept = json.loads(listed.stdout)
    assert [publish["version"] for publish in kept] == [version for version, *_ in found]
    publishes = [
        Published(version, parse_datetime(publish["published_at"]), held, token, touched)
        for (version, held, token, touched), publish in zip(found, kept, strict=True)
    ]
    key = KeyFile(HomeSettings(home=home).keys_path).create("memory", ["all"])
    yield History(home, env, key, publishes)


@pytest.fixture(scope="module")
def api(history: History) -> Iterator[RunningApi]:
    """``ductwork serve`` over the data folder, its third publish current."""
    with serving_process(history.home, 1) as running:
        yield running


# ``ductwork diff``, from what the upstream held.

NO_CHANGE = {"changedMembers": {}, "schema": {"appeared": [], "disappeared": [], "changedType": []}}


def json_type(value: object) -> str:
    """The JSON type DuckDB's ``json_type`` names for ``value``."""
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "UBIGINT" if value >= 0 else "BIGINT"
    names = {dict: "OBJECT", list: "ARRAY", str: "VARCHAR", float: "DOUBLE", type(None): "NULL"}
    return names[type(value)]


def member_types(records: Records) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for record in records.values():
        for member, value in record.items():
            found.setdefault(member, set()).add(json_type(value))
    return found


def keys_between(before: Records, after: Records) -> tuple[set[str], set[str], set[str]]:
    """The keys added, changed and deleted from ``before`` to ``after``."""
    added = after.keys() - before.keys()
    deleted = before.keys() - after.keys()
    changed = {key for key in before.keys() & after.keys() if before[key] != after[key]}
    return added, changed, deleted


def expected_diff(stream: str, before: Records, after: Records) -> dict:
    """What ``ductwork diff --format json`` must say of ``stream`` between the two."""
    added, changed, deleted = keys_between(before, after)
    members = Counter(
        member
        for key in changed
        for member in before[key].keys() | after[key].keys()
        if (member in before[key], before[key].get(member))
        != (member in after[key], after[key].get(member))
    )
    was, now = member_types(before), member_types(after)

    def typed(members: dict[str, set[str]], member: str) -> str:
        return ", ".join(sorted(members[member]))

    return {
        "stream": stream,
        "added": len(added),
        "changed": len(changed),
        "deleted": len(deleted),
        "changedMembers": dict(sorted(members.items(), key=lambda item: (-item[1], item[0]))),
        "schema": {
            "appeared": [f"{m} ({typed(now, m)})" for m in sorted(now.keys() - was.keys())],
            "disappeared": [f"{m} ({typed(was, m)})" for m in sorted(was.keys() - now.keys())],
            "changedType": [
                f"{m}: {typed(was, m)} -> {typed(now, m)}"
                for m in sorted(was.keys() & now.keys())
                if was[m] != now[m]
            ],
        },
    }


def what_the_mutations_did(history: History, start: int, end: int) -> dict[str, tuple]:
    """The keys added, changed and deleted per changed stream from publish ``start`` to
    ``end``, from the ids each mutation in between touched."""
    first, second = (p.touched for p in history.publishes[1:])
    if (start, end) == (0, 1):
        return {
            "digital-assets": (first["assets_added"], first["assets_updated"],
                               first["assets_deleted"]),
            "products": (set(), first["products_changed"], set()),
            "leads": (first["leads_added"], set(), set()),
        }  # fmt: skip
    if (start, end) == (1, 2):
        return {
            "digital-assets": (set(), second["assets_updated"], second["assets_deleted"]),
            "products": (set(), second["products_drifted"], set()),
            "leads": (set(), second["leads_changed"], set()),
        }
    assert (start, end) == (0, 2)
    added = first["assets_added"] - second["assets_deleted"]
    deleted = first["assets_deleted"] | (second["assets_deleted"] - first["assets_added"])
    updated = (first["assets_updated"] | second["assets_updated"]) - first["assets_added"]
    return {
        "digital-assets": (added, updated - deleted, deleted),
        "products": (set(), first["products_changed"] | second["products_drifted"], set()),
        "leads": (first["leads_added"], second["leads_changed"] - first["leads_added"], set()),
    }


def diff(history: History, *arguments: str) -> str:
    done = ductwork("diff", *arguments, env=history.env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def between(earlier: Published, later: Published) -> str:
    """An RFC 3339 date-time halfway between two publishes."""
    return format_datetime(earlier.at + (later.at - earlier.at) / 2)


@pytest.mark.parametrize(("start", "end"), [(0, 1), (1, 2), (0, 2)])
def test_diff_counts_exactly_the_records_and_members_the_upstream_changed_between_publishes(
    history: History, start: int, end: int
) -> None:
    before, after = history.publishes[start], history.publishes[end]
    document = json.loads(diff(history, "--from", before.version, "--to", after.version,
                               "--format", "json"))  # fmt: skip

    assert (document["from"], document["to"]) == (before.version, after.version)
    by_stream = {entry["stream"]: entry for entry in document["streams"]}
    assert list(by_stream) == [stream.name for stream in STREAMS]
    did = what_the_mutations_did(history, start, end)
    for name in CHANGED_STREAMS:
        # The upstream changed exactly the records the mutations say they touched...
        assert keys_between(before.held[name], after.held[name]) == did[name], name
        # ...and the diff says so, member by member.
        wanted = expected_diff(name, before.held[name], after.held[name])
        assert by_stream[name] == wanted, name
        assert list(by_stream[name]["changedMembers"]) == list(wanted["changedMembers"]), name
    assert by_stream["digital-assets"]["changedMembers"] == {
        member: by_stream["digital-assets"]["changed"]
        for member in ("fileSizeBytes", "title", "updatedAt")
    }  # what an update of an asset changes, every time
    for stream in STREAMS:  # the mutations touch no other stream
        if stream.name not in CHANGED_STREAMS:
            entry = {"stream": stream.name, "added": 0, "changed": 0, "deleted": 0, **NO_CHANGE}
            assert by_stream[stream.name] == entry


def test_diff_tells_the_products_schema_drift_of_the_second_mutation(history: History) -> None:
    middle, last = history.publishes[1:]
    document = json.loads(diff(history, "--from", middle.version, "--to", last.version,
                               "--stream", "products", "--format", "json"))  # fmt: skip

    [products] = document["streams"]
    assert products["stream"] == "products"
    assert (
        products["changed"] == len(last.touched["products_drifted"]) == SECOND["products_drifted"]
    )
    assert products["schema"]["appeared"] == ["installationNotes (OBJECT)"]
    assert products["schema"]["changedType"] == ["srn: VARCHAR -> UBIGINT, VARCHAR"]


@pytest.mark.parametrize(("stream", "start", "end"), [("digital-assets", 0, 2), ("products", 1, 2)])
def test_diff_as_a_table_for_one_stream_between_instants_names_its_publishes_and_counts(
    history: History, stream: str, start: int, end: int
) -> None:
    """``--from`` a date-time between two publishes names the earlier; ``--to`` a version."""
    kept = history.publishes
    before, after = kept[start], kept[end]
    printed = diff(history, "--from", between(before, kept[start + 1]), "--to", after.version,
                   "--stream", stream)  # fmt: skip

    wanted = expected_diff(stream, before.held[stream], after.held[stream])
    lines = [
        f"from {before.version} ({format_datetime(before.at)})",
        f"to   {after.version} ({format_datetime(after.at)})",
        "",
        f"{stream}: {wanted['added']} added, {wanted['changed']} changed, "
        f"{wanted['deleted']} deleted",
        *(f"  {m:<40} changed in {n} records" for m, n in wanted["changedMembers"].items()),
        *(f"  member appeared: {m}" for m in wanted["schema"]["appeared"]),
        *(f"  member disappeared: {m}" for m in wanted["schema"]["disappeared"]),
        *(f"  member changed type: {m}" for m in wanted["schema"]["changedType"]),
    ]
    assert printed.splitlines() == lines
    assert wanted["changed"] > 0 and wanted["changedMembers"]  # there is something to tell


# The past by date-time.


def get(api: RunningApi, history: History, path: str, **headers: str) -> httpx.Response:
    answer = httpx.get(
        api.url + path, headers={"Authorization": f"Bearer {history.key}", **headers}, timeout=60
    )
    assert answer.status_code in (200, 304), (path, answer.text[:500])
    return answer


def test_an_instant_between_two_publishes_is_answered_by_the_earlier_by_path_and_by_header(
    history: History, api: RunningApi
) -> None:
    first, second, _ = history.publishes
    assert second.at - first.at > timedelta(seconds=2)  # an HTTP-date's whole second fits
    sku = sorted(second.touched["products_changed"])[0]
    path = unit_path(sku)
    instant = first.at + (second.at - first.at) / 2
    by_path = get(api, history, f"{AT}/{format_datetime(instant)}{path}")
    by_header = get(api, history, path, **{"Accept-Datetime": http_date(instant, usegmt=True)})
    later = get(api, history, f"{AT}/{second.version}{path}")

    for answer in (by_path, by_header):
        assert answer.status_code == 200
        assert answer.headers["x-snapshot-version"] == first.version
        assert answer.headers["memento-datetime"] == http_date(
            first.at.replace(microsecond=0), usegmt=True
        )
        assert answer.json()["data"] == first.held["products"][sku]  # as the upstream had it
    assert later.json()["data"] == second.held["products"][sku] != by_path.json()["data"]


def test_an_instant_after_the_newest_publish_answers_as_now_by_path_and_by_header(
    history: History, api: RunningApi
) -> None:
    _, second, last = history.publishes
    sku = sorted(last.touched["products_drifted"])[0]
    path = unit_path(sku)
    instant = datetime.now(UTC)
    assert instant - last.at > timedelta(seconds=1)  # after the newest, even as a whole second
    by_path = get(api, history, f"{AT}/{format_datetime(instant)}{path}")
    by_header = get(api, history, path, **{"Accept-Datetime": http_date(instant, usegmt=True)})
    now = get(api, history, path)
    earlier = get(api, history, f"{AT}/{second.version}{path}")

    assert now.headers["x-snapshot-version"] == last.version
    for answer in (by_path, by_header):
        assert answer.status_code == 200
        assert answer.headers["x-snapshot-version"] == last.version
        assert answer.headers["memento-datetime"] == http_date(
            last.at.replace(microsecond=0), usegmt=True
        )
        assert answer.json() == now.json() and now.json()["data"] == last.held["products"][sku]
    assert earlier.json() != now.json()


# Validators on the mirror's own surface.


def test_if_none_match_on_the_changes_feed_answers_304_with_the_first_answers_etag(
    history: History, api: RunningApi
) -> None:
    first, second, _ = history.publishes
    ndjson = {"Accept": "application/x-ndjson"}
    url = f"{CHANGES}digital-assets"
    asked = [
        (f"{url}?since={first.token}", {}),
        (f"{url}?since={first.token}", ndjson),
        (f"{url}?limit=5", {}),
        (f"{url}?since={second.token}&limit=3", {}),
    ]
    for path, headers in asked:
        answer = get(api, history, path, **headers)
        assert answer.status_code == 200 and answer.content, path
        etag = answer.headers["etag"]
        again = get(api, history, path, **headers, **{"If-None-Match": etag})
        assert again.status_code == 304, path
        assert again.headers["etag"] == etag and again.content == b""

    # A changed answer (what changed since the second publish, not since the first) does not.
    held = get(api, history, f"{url}?since={first.token}").headers["etag"]
    changed = get(api, history, f"{url}?since={second.token}", **{"If-None-Match": held})
    assert changed.status_code == 200 and changed.headers["etag"] != held
    since_second = {c["key"] for c in changed.json()["changes"]}
    touched = history.publishes[2].touched
    assert since_second == touched["assets_updated"] | touched["assets_deleted"]


def test_if_none_match_on_the_past_answers_304_at_any_snapshot_holding_that_body(
    history: History, api: RunningApi
) -> None:
    first, second, last = history.publishes
    sku = sorted(second.touched["products_changed"])[0]
    path = unit_path(sku)
    then = get(api, history, f"{AT}/{first.version}{path}")
    etag = then.headers["etag"]
    again = get(api, history, f"{AT}/{first.version}{path}", **{"If-None-Match": etag})
    by_date = get(api, history, f"{AT}/{between(first, second)}{path}", **{"If-None-Match": etag})
    changed = get(api, history, f"{AT}/{second.version}{path}", **{"If-None-Match": etag})

    for held in (again, by_date):
        assert held.status_code == 304 and held.content == b""
        assert held.headers["etag"] == etag
        assert held.headers["x-snapshot-version"] == first.version
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert changed.json()["data"] == second.held["products"][sku]

    # A page no mutation changed keeps its ETag: held at the later snapshots too.
    pairings = f"{PAIRINGS.path}?count=5"
    page = get(api, history, f"{AT}/{first.version}{pairings}")
    for later in (f"{AT}/{last.version}{pairings}", pairings):
        held = get(api, history, later, **{"If-None-Match": page.headers["etag"]})
        assert held.status_code == 304 and held.headers["etag"] == page.headers["etag"]
        assert held.headers["x-snapshot-version"] == last.version
