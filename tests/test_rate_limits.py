"""Rate limits: counted in Redis across workers and replicas, checked before any record is read,
by the address a trusted proxy names, and still enforced per process when Redis is down."""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from fastapi import FastAPI

from ductwork.contract import paths
from ductwork.contract.errors import PROBLEM_JSON
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings, SettingsError, load
from ductwork.streams.registry import DIGITAL_ASSETS, INDOOR_MODELS
from sandbox.local_server import free_socket, serving
from serve.app import create_app
from serve.record_file import RecordFile
from tests.conftest import home_with_published_snapshot
from tests.helpers.bursts import WINDOW_S, bearer, burst_over_every_worker, logged_pids
from tests.helpers.serve_process import ROOT, RunningApi, serving_process

BURST_LIMIT = 40  # requests per key per second
BURST_ATTEMPTS = 3  # a burst slower than the window proves nothing: try again with a new key


@pytest.fixture(scope="module")
def replica_home(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder holding only a published snapshot, as a read-API replica has."""
    home = tmp_path_factory.mktemp("replica")
    home_with_published_snapshot(synced_home, home)
    return home


def new_key(home: Path, name: str) -> str:
    return KeyFile(HomeSettings(home=home).keys_path).create(name, ["all"])


def test_a_keys_limit_holds_across_two_serve_processes_of_two_workers_each(
    replica_home: Path, redis_url: str, tmp_path: Path
) -> None:
    settings = {
        "DUCTWORK_RATE_LIMIT_URL": redis_url,
        "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": str(BURST_LIMIT),
    }
    keys = [new_key(replica_home, f"burst-{attempt}") for attempt in range(BURST_ATTEMPTS)]
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    # The short path counts the product pages, the routes count the lead pages.
    targets = [f"{paths.PRODUCTS_LIST}?count=1", f"{paths.LEADS}?count=1"]

    with (
        logs[0].open("wb") as first_log,
        logs[1].open("wb") as second_log,
        serving_process(replica_home, 2, settings, first_log) as first,
        serving_process(replica_home, 2, settings, second_log) as second,
    ):
        burst = burst_over_every_worker(
            [first.url, second.url], logs, 2, keys, targets, 2 * BURST_LIMIT
        )
        answered_by = logged_pids(logs, burst.request_ids)
    assert burst.connections == 4 and len(set(answered_by.values())) == 4, answered_by
    statuses = [answer.status_code for answer in burst.answers]
    assert set(statuses) <= {200, 429}, statuses
    assert BURST_LIMIT <= statuses.count(200) <= BURST_LIMIT * 1.1, statuses
    for refused in (answer for answer in burst.answers if answer.status_code == 429):
        assert int(refused.headers["Retry-After"]) >= 1
        problem = refused.json()  # the products envelope, or the CRM family's problem
        assert problem.get("errors") or problem.get("type") == "/problems/rate-limited"


@dataclass(frozen=True)
class InProcessApi:
    """An app served on loopback in this process, so its state can be looked at."""

    app: FastAPI
    url: str
    key: str


@pytest.fixture
def strict_app(replica_home: Path) -> Iterator[InProcessApi]:
    """A fresh app over the replica's snapshot with a key limit of 2 a second."""
    key = new_key(replica_home, "strict")
    limits = ServeSettings(serve_key_requests_per_second=2)
    app = create_app(HomeSettings(home=replica_home), limits)
    with serving(app) as url:
        yield InProcessApi(app, url, key)


def calls_until_refused(url: str, key: str, expected: int, tries: int = 20) -> int:
    """How many calls answered ``expected`` before the first 429."""
    with httpx.Client(headers=bearer(key), timeout=30) as client:
        for passed in range(tries):
            answer = client.get(url)
            if answer.status_code == 429:
                return passed
            assert answer.status_code == expected, answer.text[:300]
    raise AssertionError(f"no 429 in {tries} calls to {url}")


class CountingReads:
    """A list's record file, counting the pages read from it."""

    def __init__(self, whole: RecordFile) -> None:
        self.whole = whole
        self.reads = 0

    def __len__(self) -> int:
        return len(self.whole)

    def joined(self, start: int, end: int) -> bytes:
        self.reads += 1
        return self.whole.joined(start, end)


def test_a_request_over_the_limit_reads_no_record(strict_app: InProcessApi) -> None:
    assets = strict_app.app.state.live.get().lists[DIGITAL_ASSETS.name]
    assert assets.whole is not None
    assets.whole = reads = CountingReads(assets.whole)
    calls_until_refused(f"{strict_app.url}{paths.PRODUCTS_LIST}?count=1", strict_app.key, 200)
    page = f"{strict_app.url}{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}?count=10"
    refused = httpx.get(page, headers=bearer(strict_app.key))
    assert refused.status_code == 429
    assert refused.headers["content-type"].startswith("application/json")
    assert reads.reads == 0, "the page was read for a request refused anyway"
    # Once the window moves on, the same request is served and reads the records it shows.
    deadline = time.monotonic() + 5 * WINDOW_S
    while httpx.get(page, headers=bearer(strict_app.key)).status_code == 429:
        assert time.monotonic() < deadline, "still refused after the window passed"
    assert reads.reads == 1


def test_a_lookup_the_short_path_hands_to_the_routes_counts_once(strict_app: InProcessApi) -> None:
    missing = f"{strict_app.url}{paths.UNITS_RESOLVER}/NO-SUCH-SKU"
    assert calls_until_refused(missing, strict_app.key, 404) >= 2


def run_serve(home: Path, settings: dict[str, str]) -> AbstractContextManager[RunningApi]:
    """``ductwork serve`` with one worker and 2 key-less indoor-models calls a second."""
    return serving_process(home, 1, {"DUCTWORK_SERVE_KEYLESS_REQUESTS_PER_SECOND": "2", **settings})


def indoor_models(url: str, forwarded_for: list[str]) -> list[int]:
    """The statuses of one key-less call per ``X-Forwarded-For`` value, in a quick row."""
    with httpx.Client(timeout=30) as client:
        return [
            client.get(f"{url}{INDOOR_MODELS.path}", headers={"X-Forwarded-For": sent}).status_code
            for sent in forwarded_for
        ]


def test_forwarded_for_counts_only_from_a_trusted_proxy(replica_home: Path) -> None:
    distinct = [f"203.0.113.{n}" for n in range(1, 7)]
    with run_serve(replica_home, {}) as untrusted:
        statuses = indoor_models(untrusted.url, distinct)
    # The loopback peer is no trusted proxy: every call counts against 127.0.0.1.
    assert statuses[:2] == [200, 200] and 429 in statuses, statuses
    with run_serve(replica_home, {"DUCTWORK_TRUSTED_PROXIES": '["127.0.0.0/8"]'}) as behind:
        assert indoor_models(behind.url, distinct) == [200] * len(distinct)
        same = indoor_models(behind.url, ["198.51.100.7"] * 4)
    assert same[:2] == [200, 200] and 429 in same, same


def test_trusted_proxies_that_are_no_address_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DUCTWORK_TRUSTED_PROXIES", '["10.0.0.0/8", "proxy.internal"]')
    with pytest.raises(SettingsError, match="DUCTWORK_TRUSTED_PROXIES"):
        load(ServeSettings)


def test_with_redis_unreachable_limits_hold_per_process_with_a_warning_and_a_metric(
    replica_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with free_socket() as sock:  # a port nothing listens on
        port = sock.getsockname()[1]
    password = "redis-password-never-logged"
    limits = ServeSettings(
        serve_key_requests_per_second=3, rate_limit_url=f"redis://:{password}@127.0.0.1:{port}/0"
    )
    key = new_key(replica_home, "redis-down")
    app = create_app(HomeSettings(home=replica_home), limits)
    with caplog.at_level(logging.WARNING, logger="ductwork.serve"), serving(app) as url:
        passed = calls_until_refused(f"{url}{paths.PRODUCTS_LIST}?count=1", key, 200)
    assert passed >= 3
    errors = app.state.metrics.registry.get_sample_value("ductwork_rate_limit_store_errors_total")
    assert errors is not None and errors >= 1
    assert "rate limits counted per process" in caplog.text
    assert password not in caplog.text


def test_ipv6_clients_of_one_slash_64_share_a_limit(replica_home: Path) -> None:
    one_net = [f"2001:db8:7:7::{n:x}" for n in range(1, 7)]
    many_nets = [f"2001:db8:7:{n:x}::1" for n in range(1, 7)]
    with run_serve(replica_home, {"DUCTWORK_TRUSTED_PROXIES": '["127.0.0.0/8"]'}) as behind:
        shared = indoor_models(behind.url, one_net)
        apart = indoor_models(behind.url, many_nets)
    # Six addresses of one /64 are one client: its limit of 2 a second refuses the rest.
    assert shared[:2] == [200, 200] and 429 in shared, shared
    assert apart == [200] * len(many_nets), apart


@pytest.mark.parametrize("path", [paths.PRODUCTS_LIST, paths.LEADS])  # short path, routes
def test_a_page_weighs_by_the_records_it_asks_for(replica_home: Path, path: str) -> None:
    name = path.rsplit("/", 1)[-1]
    big_pages, small_pages = new_key(replica_home, f"big-{name}"), new_key(replica_home, name)
    limits = {"DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "20"}
    with serving_process(replica_home, 1, limits) as api:
        big = calls_until_refused(f"{api.url}{path}?count=1000", big_pages, 200)
        small = calls_until_refused(f"{api.url}{path}?count=10", small_pages, 200, tries=60)
    # 20 units a second: two pages of 1,000 records (10 units each), or twenty of 10 records
    # (more only when a second went by).
    assert 2 <= big <= 3, big
    assert small >= 20, small


def test_failed_requests_from_one_address_are_refused_at_their_limit_whatever_the_key(
    replica_home: Path,
) -> None:
    valid = new_key(replica_home, "failing-address")
    settings = {
        "DUCTWORK_SERVE_FAILED_REQUESTS_PER_SECOND": "5",
        "DUCTWORK_TRUSTED_PROXIES": '["127.0.0.0/8"]',
    }
    guesser = {"X-Forwarded-For": "198.51.100.9"}
    with run_serve(replica_home, settings) as api, httpx.Client(timeout=30) as client:
        guesses = [
            client.get(f"{api.url}{paths.LEADS}", headers={**guesser, **bearer(f"dwk_guess{n}")})
            for n in range(12)
        ]
        refused = client.get(
            f"{api.url}{paths.PRODUCTS_LIST}", headers={**guesser, **bearer(valid)}
        )
        elsewhere = client.get(
            f"{api.url}{paths.PRODUCTS_LIST}",
            headers={"X-Forwarded-For": "198.51.100.10", **bearer(valid)},
        )
        # A valid key's 404s (unknown SKUs) are no failures; unknown paths without one are.
        lookups = [
            client.get(
                f"{api.url}{paths.UNITS_RESOLVER}/NO-SUCH-{n}",
                headers={"X-Forwarded-For": "198.51.100.11", **bearer(valid)},
            ).status_code
            for n in range(12)
        ]
        probes = [
            client.get(f"{api.url}/no/such/{n}", headers={"X-Forwarded-For": "198.51.100.12"})
            for n in range(12)
        ]
        deadline = time.monotonic() + 5 * WINDOW_S
        while (
            client.get(
                f"{api.url}{paths.PRODUCTS_LIST}", headers={**guesser, **bearer(valid)}
            ).status_code
            == 429
        ):
            assert time.monotonic() < deadline, "still refused after the window passed"
    statuses = [answer.status_code for answer in guesses]
    assert statuses[:5] == [401] * 5 and set(statuses[6:]) == {429}, statuses
    problem = guesses[-1]
    assert problem.headers["content-type"] == PROBLEM_JSON
    assert problem.json()["type"] == "/problems/rate-limited"
    assert int(problem.headers["retry-after"]) >= 1
    # The valid key of the same address is refused too (nothing is told about a key), in the
    # products family's own style; another address is served.
    assert refused.status_code == 429 and refused.json()["errors"][0]["code"] == "RATE_LIMITED"
    assert elsewhere.status_code == 200
    assert lookups == [404] * 12
    probe_statuses = [answer.status_code for answer in probes]
    assert probe_statuses[:5] == [404] * 5 and 429 in probe_statuses, probe_statuses


def test_the_example_configuration_trusts_only_a_narrow_proxy_range() -> None:
    configmap = yaml.safe_load((ROOT / "deploy" / "k8s" / "settings-configmap.yaml").read_text())
    networks = [
        ipaddress.ip_network(entry)
        for entry in json.loads(configmap["data"]["DUCTWORK_TRUSTED_PROXIES"])
    ]
    assert networks
    assert all(network.num_addresses <= 256 for network in networks), networks
