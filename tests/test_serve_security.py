"""Security of the read API: the auth matrix over every protected path, rate limits per key and
per client address, and no secret or personal data in the access log or error bodies."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime as http_date
from pathlib import Path

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract import paths
from ductwork.contract.errors import PROBLEM_JSON
from ductwork.contract.paths import Family, family_of
from ductwork.keys import OPS_SCOPE, SCOPE_OF, SCOPES, KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from ductwork.snapshots import guard
from ductwork.streams.registry import (
    CONTRACTORS,
    DIGITAL_ASSETS,
    INDOOR_MODELS,
    LEADS,
    MANUALS,
    PAIRINGS,
    PRODUCTS,
    STREAMS,
    SUBMITTALS,
)
from sandbox.local_server import serving
from serve.app import create_app
from tests.conftest import ReadApi

# Every spec path of each stream, built from the contract's path list; lookups with a made-up
# key (authentication comes before the lookup, so the key decides the answer, not the record).
SPEC_PATHS_OF: dict[str, tuple[str, ...]] = {
    PRODUCTS.name: (
        paths.PRODUCTS_LIST,
        f"{paths.UNITS_RESOLVER}/ANY-SKU",
        *(paths.unit_path(slug) for slug in paths.UNIT_SLUGS),
        *(f"{paths.unit_path(slug)}/ANY-SKU" for slug in paths.UNIT_SLUGS),
    ),
    PAIRINGS.name: (PAIRINGS.path, f"{PAIRINGS.path}/1"),
    DIGITAL_ASSETS.name: (paths.DATA_WAREHOUSE_DIGITAL_ASSETS,),
    SUBMITTALS.name: (f"{SUBMITTALS.path}?idu=X",),
    LEADS.name: (paths.LEADS, f"{paths.LEADS}/00Q-ANY"),
    CONTRACTORS.name: (CONTRACTORS.path,),
    INDOOR_MODELS.name: (INDOOR_MODELS.path,),  # served without a key
    MANUALS.name: (MANUALS.path,),
}
# Every path that needs a key: the streams' but the open one's, and the image sync's trigger.
PROTECTED_PATHS: tuple[str, ...] = (
    *(
        path
        for name, found in SPEC_PATHS_OF.items()
        if name != INDOOR_MODELS.name
        for path in found
    ),
    paths.PIM_IMAGE_SYNC,
)


def _template(path: str) -> str:
    """``/a/b/{x}`` for ``/a/b/value`` when the last segment is a made-up key."""
    bare = path.split("?")[0]
    return bare.rsplit("/", 1)[0] + "/{}" if bare.endswith(("/1", "ANY-SKU", "ANY")) else bare


def test_the_auth_matrix_covers_every_documented_path_that_needs_a_key(read_api: ReadApi) -> None:
    ops = {"Authorization": f"Bearer {read_api.key}"}
    documented = httpx.get(f"{read_api.url}/openapi.json", headers=ops).json()["paths"]
    needing_key = {
        path.split("{")[0] + ("{}" if "{" in path else "")
        for path in documented
        if family_of(path) is not None and path != INDOOR_MODELS.path
    }
    assert needing_key == {_template(path) for path in PROTECTED_PATHS}


def assert_error_style(answer: httpx.Response, status: int, path: str) -> None:
    """``answer`` has ``status`` in the error style of the path's family (wire contract)."""
    assert answer.status_code == status, (path, answer.status_code, answer.text[:300])
    body = answer.json()
    family = family_of(path.split("?")[0])
    if family is Family.PRODUCTS:
        assert body["success"] is False and body["data"] is None
        expected_code = "UNAUTHORIZED" if status == 401 else "FORBIDDEN"
        assert body["errors"][0]["code"] == expected_code
    elif family is Family.DATA_WAREHOUSE:
        assert body["success"] is False
        assert isinstance(body["errors"][0], str) and body["errors"][0]
    else:
        assert answer.headers["content-type"].startswith(PROBLEM_JSON)
        slug = "unauthorized" if status == 401 else "forbidden"
        assert body["type"] == f"/problems/{slug}" and body["status"] == status
    if status == 401:
        assert answer.headers["www-authenticate"] == "Bearer"


@pytest.fixture(scope="module")
def matrix_keys(read_api: ReadApi) -> dict[str, str]:
    """A revoked key, and for each scope a key holding every scope but that one."""
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    revoked = store.create("matrix-revoked", ["all"])
    store.revoke("matrix-revoked")
    keys = {"revoked": revoked}
    for scope in SCOPES:
        keys[f"without-{scope}"] = store.create(
            f"matrix-without-{scope}", [s for s in SCOPES if s != scope]
        )
    return keys


@pytest.mark.parametrize("path", PROTECTED_PATHS)
def test_every_protected_path_answers_401_401_401_403_in_its_familys_style(
    read_api: ReadApi, matrix_keys: dict[str, str], path: str
) -> None:
    url = f"{read_api.url}{path}"
    scope = SCOPE_OF[family_of(path.split("?")[0])]
    attempts = {
        "no key": ({}, 401),
        "wrong key": ({"Authorization": "Bearer dwk_not-a-key-that-was-ever-issued"}, 401),
        "revoked key": ({"Authorization": f"Bearer {matrix_keys['revoked']}"}, 401),
        "key lacking the scope": (
            {"Authorization": f"Bearer {matrix_keys[f'without-{scope}']}"},
            403,
        ),
    }
    for headers, status in attempts.values():
        assert_error_style(httpx.get(url, headers=headers), status, path)


def test_the_scope_matrix_names_the_spec_paths_of_every_stream_of_the_registry() -> None:
    assert list(SPEC_PATHS_OF) == [stream.name for stream in STREAMS]


# Every scope a key can be given (``all`` is the four data scopes), and a stream's own, the name
# of a stream of the registry after ``stream:``.
MATRIX_SCOPES: tuple[str, ...] = (
    *SCOPES,
    OPS_SCOPE,
    *(f"stream:{stream.name}" for stream in STREAMS),
)
FEED = "/_ductwork/v1/changes"
AT = "/_ductwork/v1/at"


@dataclass(frozen=True)
class MirrorRequest:
    """A request of the mirror's own surface, and the spec path whose scope it needs."""

    form: str  # "feed", "at" or "Accept-Datetime"
    target: str
    headers: dict[str, str]
    spec_path: str
    stream: str


def mirror_requests(version: str) -> list[MirrorRequest]:
    """For every stream: its changes feed, and each of its spec paths as of the current
    snapshot, by ``/at/{version}`` and by ``Accept-Datetime`` (an instant after the newest
    publish, so answered from it)."""
    now = {"Accept-Datetime": http_date(datetime.now(UTC), usegmt=True)}
    requests = []
    for stream in STREAMS:
        requests.append(
            MirrorRequest("feed", f"{FEED}/{stream.name}?limit=1", {}, stream.path, stream.name)
        )
        for path in SPEC_PATHS_OF[stream.name]:
            requests.append(MirrorRequest("at", f"{AT}/{version}{path}", {}, path, stream.name))
            requests.append(MirrorRequest("Accept-Datetime", path, now, path, stream.name))
    return requests


def allowed(scope: str, request: MirrorRequest) -> bool:
    """What the matrix expects: the family's scope or the stream's own opens a stream's feed
    and its past; the past of the open stream's path is told to any key."""
    family_scope = SCOPE_OF[family_of(request.spec_path.split("?")[0])]
    if request.form != "feed" and request.stream == INDOOR_MODELS.name:
        return True
    return scope in (family_scope, f"stream:{request.stream}")


@pytest.fixture(scope="module")
def open_api(read_api: ReadApi) -> Iterator[str]:
    """The read API over the same data folder with no limit that a matrix of a few hundred
    calls could reach (the open stream's calls are limited per client address, not per key)."""
    limits = ServeSettings(
        serve_key_requests_per_second=1_000_000,
        serve_failed_requests_per_second=1_000_000,
        serve_keyless_requests_per_second=1_000_000,
    )
    with serving(create_app(HomeSettings(home=read_api.home), limits)) as url:
        yield url


@pytest.fixture(scope="module")
def scope_keys(read_api: ReadApi) -> dict[str, str]:
    """A key holding one scope alone, for every scope of the matrix."""
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    return {scope: store.create(f"only-{scope}", [scope]) for scope in MATRIX_SCOPES}


@pytest.fixture(scope="module")
def full_answers(read_api: ReadApi, open_api: str) -> dict[str, tuple[int, bytes]]:
    """The status and body of every mirror request of the matrix, and of every spec path,
    as a key holding every scope gets them."""
    version = snapshots.current(HomeSettings(home=read_api.home).snapshots_dir).version
    every = {"Authorization": f"Bearer {read_api.key}"}
    found: dict[str, tuple[int, bytes]] = {}
    with httpx.Client(base_url=open_api) as client:
        for request in mirror_requests(version):
            answer = client.get(request.target, headers={**every, **request.headers})
            found[request.form + request.target] = (answer.status_code, answer.content)
        for spec_paths in SPEC_PATHS_OF.values():
            for path in spec_paths:
                answer = client.get(path, headers=every)
                found[path] = (answer.status_code, answer.content)
    assert all(status not in (401, 403) for status, _ in found.values()), found
    return found


@pytest.mark.parametrize("scope", MATRIX_SCOPES)
def test_the_feed_and_the_past_of_each_stream_open_to_its_familys_scope_and_its_own_alone(
    read_api: ReadApi,
    open_api: str,
    scope_keys: dict[str, str],
    full_answers: dict[str, tuple[int, bytes]],
    scope: str,
) -> None:
    version = snapshots.current(HomeSettings(home=read_api.home).snapshots_dir).version
    key = {"Authorization": f"Bearer {scope_keys[scope]}"}
    opened: list[str] = []
    with httpx.Client(base_url=open_api) as client:
        for request in mirror_requests(version):
            answer = client.get(request.target, headers={**key, **request.headers})
            where = (scope, request.form, request.target)
            if not allowed(scope, request):
                if request.form == "feed":
                    assert answer.status_code == 403, (where, answer.text[:300])
                    assert answer.json()["type"] == "/problems/forbidden"
                else:  # the route of the spec path refuses it, in its family's style
                    assert_error_style(answer, 403, request.spec_path)
                continue
            # As a key holding every scope gets it: the same status and the same bytes.
            expected_status, expected_body = full_answers[request.form + request.target]
            assert answer.status_code == expected_status, (where, answer.text[:300])
            assert answer.content == expected_body, where
            if request.form != "feed":
                assert "memento-datetime" in answer.headers, where
            opened.append(request.stream)
        # The spec paths themselves follow the same rule (the open stream's needs no key).
        for name, spec_paths in SPEC_PATHS_OF.items():
            for path in spec_paths:
                answer = client.get(path, headers=key)
                family_scope = SCOPE_OF[family_of(path.split("?")[0])]
                if name == INDOOR_MODELS.name or scope in (family_scope, f"stream:{name}"):
                    assert (answer.status_code, answer.content) == full_answers[path], path
                else:
                    assert_error_style(answer, 403, path)
        # The image sync's trigger belongs to no stream: a stream's scope never opens it.
        if scope != SCOPE_OF[Family.INTERNAL]:
            assert_error_style(
                client.get(paths.PIM_IMAGE_SYNC, headers=key), 403, paths.PIM_IMAGE_SYNC
            )
    if scope.startswith("stream:"):
        # The stream's feed and past, and (the open stream aside) nothing else.
        assert set(opened) == {scope.removeprefix("stream:"), INDOOR_MODELS.name}


def test_the_feed_and_the_past_answer_401_to_a_request_without_a_valid_key(
    read_api: ReadApi, open_api: str, matrix_keys: dict[str, str]
) -> None:
    version = snapshots.current(HomeSettings(home=read_api.home).snapshots_dir).version
    presented = {
        "no key": {},
        "wrong key": {"Authorization": "Bearer dwk_not-a-key-that-was-ever-issued"},
        "revoked key": {"Authorization": f"Bearer {matrix_keys['revoked']}"},
    }
    with httpx.Client(base_url=open_api) as client:
        for request in mirror_requests(version):
            for headers in presented.values():
                answer = client.get(request.target, headers={**headers, **request.headers})
                assert answer.status_code == 401, (request.target, answer.text[:300])
                assert answer.headers["www-authenticate"] == "Bearer"


def test_an_indoor_models_key_reads_their_feed_and_past_and_nothing_of_the_contractors(
    read_api: ReadApi, open_api: str, scope_keys: dict[str, str]
) -> None:
    models = {"Authorization": f"Bearer {scope_keys[f'stream:{INDOOR_MODELS.name}']}"}
    version = snapshots.current(HomeSettings(home=read_api.home).snapshots_dir).version
    with httpx.Client(base_url=open_api, headers=models) as client:
        feed = client.get(f"{FEED}/{INDOOR_MODELS.name}")
        assert feed.status_code == 200 and feed.json()["changes"], feed.text[:300]
        past = client.get(f"{AT}/{version}{INDOOR_MODELS.path}")
        assert past.status_code == 200 and past.json()["data"], past.text[:300]
        for refused in (
            client.get(f"{FEED}/{CONTRACTORS.name}"),
            client.get(CONTRACTORS.path),
            client.get(f"{AT}/{version}{CONTRACTORS.path}"),
        ):
            assert refused.status_code == 403, refused.text[:300]
            assert refused.json()["type"] == "/problems/forbidden"
        # Where the family's style tells why, it names both scopes that would do.
        [error] = client.get(paths.PRODUCTS_LIST).json()["errors"]
        assert error["message"] == "This key lacks the 'catalog' or 'stream:products' scope"


@pytest.fixture(scope="module")
def strict_api(read_api: ReadApi) -> Iterator[str]:
    """The read API with tight limits: 3 calls per key and 2 key-less calls per address a
    second."""
    limits = ServeSettings(serve_key_requests_per_second=3, serve_keyless_requests_per_second=2)
    with serving(create_app(HomeSettings(home=read_api.home), limits)) as url:
        yield url


def first_refusal(url: str, headers: dict[str, str], tries: int = 60) -> tuple[int, httpx.Response]:
    """Call ``url`` until a 429; returns how many calls passed before it, and the 429."""
    with httpx.Client(headers=headers) as client:
        for passed in range(tries):
            answer = client.get(url)
            if answer.status_code == 429:
                return passed, answer
            assert answer.status_code == 200, answer.text[:300]
    raise AssertionError(f"no 429 in {tries} calls to {url}")


@pytest.mark.parametrize(
    "path", [paths.unit_path("indoor-units"), paths.DATA_WAREHOUSE_DIGITAL_ASSETS, paths.LEADS]
)
def test_a_key_over_its_limit_gets_429_with_retry_after_while_another_key_is_served(
    read_api: ReadApi, strict_api: str, path: str
) -> None:
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    busy, other = store.create("busy", ["all"]), store.create("other", ["all"])
    passed, refused = first_refusal(f"{strict_api}{path}", {"Authorization": f"Bearer {busy}"})
    assert passed >= 3  # the limit itself is let through (more if a second went by)
    assert int(refused.headers["retry-after"]) >= 1
    body = refused.json()
    family = family_of(path)
    if family is Family.PRODUCTS:
        assert body["errors"][0]["code"] == "RATE_LIMITED"
    elif family is Family.DATA_WAREHOUSE:
        assert body["success"] is False and body["errors"]
    else:
        assert body["type"] == "/problems/rate-limited" and body["status"] == 429
    served = httpx.get(f"{strict_api}{path}", headers={"Authorization": f"Bearer {other}"})
    assert served.status_code == 200


def test_keyless_indoor_models_are_limited_per_client_address_with_a_429_problem(
    strict_api: str,
) -> None:
    passed, refused = first_refusal(f"{strict_api}{INDOOR_MODELS.path}", {})
    assert passed >= 2
    assert refused.headers["content-type"].startswith(PROBLEM_JSON)
    assert refused.json()["type"] == "/problems/rate-limited"
    assert int(refused.headers["retry-after"]) >= 1


def lead_contacts(home: Path, limit: int = 20) -> list[str]:
    """E-mail addresses and phone numbers of some leads in the current snapshot."""
    snap, con = snapshots.open_current(HomeSettings(home=home).snapshots_dir)
    with con:
        rows = con.execute(
            "SELECT record FROM lead_details WHERE found ORDER BY id LIMIT ?", [limit]
        ).fetchall()
    found: list[str] = []
    for (record,) in rows:
        found += _contact_values(json.loads(record))
    assert found, f"no contact data in snapshot {snap.version}"
    return found


def _contact_values(value: object) -> list[str]:
    """Strings under members whose name says e-mail or phone, at any depth."""
    found: list[str] = []
    if isinstance(value, dict):
        for name, inner in value.items():
            lowered = name.lower()
            if isinstance(inner, str) and inner and ("mail" in lowered or "phone" in lowered):
                found.append(inner)
            else:
                found += _contact_values(inner)
    elif isinstance(value, list):
        for inner in value:
            found += _contact_values(inner)
    return found


def test_access_log_and_error_bodies_never_hold_keys_tokens_or_lead_contacts(
    read_api: ReadApi, caplog: pytest.LogCaptureFixture
) -> None:
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    catalog_only = store.create("log-catalog-only", ["catalog"])
    revoked = store.create("log-revoked", ["all"])
    store.revoke("log-revoked")
    wrong = "dwk_wrong-token-that-must-not-be-logged"
    contacts = lead_contacts(read_api.home)
    keys = [read_api.key, catalog_only, revoked, wrong]
    lead_ids = _lead_ids(read_api.home)
    requests = [
        (f"{paths.LEADS}?count=5&fields=Id,CreatedDate", read_api.key),
        *((f"{paths.LEADS}/{lead_id}", key) for lead_id in lead_ids for key in keys),
        # Contact data sent as a (bad) parameter is neither echoed nor logged.
        *((f"{paths.LEADS}?createdAfter={contact}", read_api.key) for contact in contacts[:4]),
        *((f"{paths.PRODUCTS_LIST}?count=0", key) for key in keys),
        (f"{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}?updatedAfter=x", read_api.key),
    ]
    error_bodies: list[str] = []
    with caplog.at_level(logging.INFO, logger="ductwork.access"), httpx.Client() as client:
        for path, key in requests:
            answer = client.get(
                f"{read_api.url}{path}",
                headers={"Authorization": f"Bearer {key}", "X-Api-Key": key},
            )
            if answer.status_code >= 400:
                error_bodies.append(answer.text)
    access_lines = [r.getMessage() for r in caplog.records if r.name == "ductwork.access"]
    assert len(access_lines) >= len(requests)
    assert len(error_bodies) >= len(lead_ids) * 3 + 4
    secrets = [*keys, *contacts]
    for text in [*access_lines, *error_bodies]:
        for secret in secrets:
            assert secret not in text, f"{secret[:6]}... leaked into: {text[:200]}"


def _lead_ids(home: Path) -> list[str]:
    snap = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert snap is not None
    with guard.open_locked(snap.path) as con:
        rows = con.execute("SELECT id FROM lead_details WHERE found ORDER BY id LIMIT 3").fetchall()
    return [row[0] for row in rows]


OPERATIONAL_PATHS = ("/metrics", "/docs", "/redoc", "/openapi.json")


def test_operational_endpoints_answer_only_a_key_with_the_ops_scope(read_api: ReadApi) -> None:
    store = KeyFile(HomeSettings(home=read_api.home).keys_path)
    every_data_scope = store.create("ops-all", ["all"])  # all: the four data scopes
    assert OPS_SCOPE not in store.verify(every_data_scope).scopes
    ops_only = store.create("ops-only", [OPS_SCOPE])
    for path in OPERATIONAL_PATHS:
        url = f"{read_api.url}{path}"
        refused = httpx.get(url)
        assert refused.status_code == 401, (path, refused.text[:200])
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.headers["content-type"].startswith(PROBLEM_JSON)
        assert refused.json()["type"] == "/problems/unauthorized"
        lacking = httpx.get(url, headers={"Authorization": f"Bearer {every_data_scope}"})
        assert lacking.status_code == 403, (path, lacking.text[:200])
        assert lacking.json() == {
            "type": "/problems/forbidden", "title": "Forbidden", "status": 403, "instance": path,
        }  # fmt: skip
        allowed = httpx.get(url, headers={"Authorization": f"Bearer {ops_only}"})
        assert allowed.status_code == 200, (path, allowed.text[:200])
    # The ops scope opens nothing else.
    data = httpx.get(
        f"{read_api.url}{paths.PRODUCTS_LIST}", headers={"Authorization": f"Bearer {ops_only}"}
    )
    assert data.status_code == 403
    for path in ("/healthz", "/readyz"):
        assert httpx.get(f"{read_api.url}{path}").status_code == 200


def test_public_docs_serve_the_operational_endpoints_to_anyone_and_say_so(
    read_api: ReadApi,
) -> None:
    public = ServeSettings(serve_public_docs=True)
    with serving(create_app(HomeSettings(home=read_api.home), public)) as url:
        for path in OPERATIONAL_PATHS:
            assert httpx.get(f"{url}{path}").status_code == 200, path
        metrics = httpx.get(f"{url}/openapi.json").json()["paths"]["/metrics"]["get"]
    assert metrics["security"] == [] and "401" not in metrics["responses"]
    ops = {"Authorization": f"Bearer {read_api.key}"}
    guarded = httpx.get(f"{read_api.url}/openapi.json", headers=ops).json()
    assert guarded["paths"]["/metrics"]["get"]["security"] == [{"bearerAuth": []}]


def test_every_answer_carries_nosniff_short_path_routes_errors_and_operations(
    read_api: ReadApi, strict_api: str
) -> None:
    key = {"Authorization": f"Bearer {read_api.key}"}
    sku = httpx.get(f"{read_api.url}{paths.unit_path('indoor-units')}?count=1", headers=key)
    found = sku.json()["data"][0]["_links"]["self"]["href"]  # percent-encoded
    record = httpx.get(f"{read_api.url}{found}", headers=key)
    answers = [
        sku,  # a page of the short path
        record,
        httpx.get(f"{read_api.url}{paths.UNITS_RESOLVER}/NO-SUCH-SKU", headers=key),
        httpx.get(
            f"{read_api.url}{found}", headers={**key, "If-None-Match": record.headers["etag"]}
        ),
        httpx.get(f"{read_api.url}{paths.LEADS}?count=2", headers=key),
        httpx.get(
            f"{read_api.url}{paths.PRODUCTS_LIST}", headers={**key, "Accept-Encoding": "gzip"}
        ),
        httpx.get(f"{read_api.url}{paths.PRODUCTS_LIST}?count=0", headers=key),
        httpx.get(f"{read_api.url}{paths.LEADS}"),
        httpx.post(f"{read_api.url}{paths.LEADS}", headers=key),
        httpx.get(f"{read_api.url}/no/such/path"),
        *(httpx.get(f"{read_api.url}{path}", headers=key) for path in OPERATIONAL_PATHS),
        httpx.get(f"{read_api.url}/healthz"),
        httpx.get(f"{read_api.url}/readyz"),
    ]
    _, refused = first_refusal(f"{strict_api}{INDOOR_MODELS.path}", {})
    answers.append(refused)
    statuses = {answer.status_code for answer in answers}
    assert {200, 304, 400, 401, 404, 405, 429} <= statuses
    for answer in answers:
        assert answer.headers.get("x-content-type-options") == "nosniff", (
            answer.request.url,
            answer.status_code,
        )
