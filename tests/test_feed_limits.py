"""The changes feed costs what it reads: a page weighs by the entries it asks for, as a list
page does by its records, and a worker holds a bounded number of long polls, in all and per
key, answering the rest at once (serve/deps.py, serve/long_polls.py).

The page's cost is per process: tested on the app served in-process on loopback. The long polls
are held per worker: tested through ``ductwork serve`` as operators start it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ductwork.contract.paths import PRODUCTS_LIST
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import serving
from serve.app import create_app
from tests.conftest import home_with_published_snapshot
from tests.helpers.serve_process import RunningApi, serving_process
from tests.helpers.sync import publish_altered_copy

CHANGES = "/_ductwork/v1/changes/"
WAIT_LIMIT_S = 30  # how long the test waits for the server to hold a long poll


@pytest.fixture
def home(synced_home: Path, tmp_path: Path) -> Path:
    """A data folder of its own holding a copy of the synced snapshot."""
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    return home


def bearer(home: Path, name: str, scopes: list[str]) -> dict[str, str]:
    key = KeyFile(HomeSettings(home=home).keys_path).create(name, scopes)
    return {"Authorization": f"Bearer {key}"}


def test_a_feed_page_of_ten_thousand_entries_costs_as_much_as_a_hundred_list_pages(
    home: Path,
) -> None:
    settings = ServeSettings(serve_key_requests_per_second=150)
    headers = bearer(home, "reader", ["all"])
    # A page weighs by the entries it asks for, whatever it finds: a short stream answers
    # quickly, so the second request comes well within the first one's second.
    ask = f"{CHANGES}indoor-models"
    with serving(create_app(HomeSettings(home=home), settings)) as url, httpx.Client() as client:
        big = client.get(url + ask, params={"limit": 10000}, headers=headers)
        assert big.status_code == 200, big.text
        # 100 of the 150 units are spent: another such page does not fit, a small one does.
        again = client.get(url + ask, params={"limit": 10000}, headers=headers)
        assert again.status_code == 429
        assert again.headers["content-type"] == "application/problem+json"
        small = client.get(url + ask, params={"limit": 100}, headers=headers)
        assert small.status_code == 200


def caught_up(api: RunningApi, headers: dict[str, str], stream: str) -> str:
    """A token with nothing after it: a request from it with ``wait`` is held."""
    params: dict[str, object] = {"limit": 10000}
    while True:
        body = httpx.get(f"{api.url}{CHANGES}{stream}", params=params, headers=headers).json()
        if not body["hasMore"]:
            return body["next"]
        params["since"] = body["next"]


def waiting(api: RunningApi, ops: dict[str, str]) -> float:
    """The worker's long polls held, as its metrics tell."""
    text = httpx.get(f"{api.url}/metrics", headers=ops).text
    lines = [line for line in text.splitlines() if line.startswith("ductwork_feed_waiting")]
    return float(lines[0].split()[-1])


def until_waiting(api: RunningApi, ops: dict[str, str], count: int) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while waiting(api, ops) != count:
        assert time.monotonic() < deadline, f"{count} long polls were never held"
        time.sleep(0.05)  # polls the metrics; times nothing


@pytest.fixture
def held_api(home: Path) -> Iterator[tuple[RunningApi, Path]]:
    settings = {"DUCTWORK_SERVE_MAX_WAITING": "2", "DUCTWORK_SERVE_MAX_WAITING_PER_KEY": "1"}
    with serving_process(home, 1, settings) as api:
        yield api, home


def test_long_polls_past_the_per_key_and_per_worker_caps_are_answered_at_once(
    held_api: tuple[RunningApi, Path],
) -> None:
    api, home = held_api
    keys = {name: bearer(home, name, ["all"]) for name in ("a", "b", "c")}
    ops = bearer(home, "metrics", ["ops"])
    token = caught_up(api, keys["a"], "pairings")
    held: list[httpx.Response] = []

    def long_poll(headers: dict[str, str]) -> None:
        answer = httpx.get(
            f"{api.url}{CHANGES}pairings", params={"since": token, "wait": 60},
            headers=headers, timeout=120,
        )  # fmt: skip
        held.append(answer)

    def at_once(headers: dict[str, str]) -> httpx.Response:
        # A held request would outlast this timeout by far (it waits up to 60 s).
        return httpx.get(
            f"{api.url}{CHANGES}pairings", params={"since": token, "wait": 60},
            headers=headers, timeout=10,
        )  # fmt: skip

    threads = [threading.Thread(target=long_poll, args=(keys["a"],))]
    threads[0].start()
    until_waiting(api, ops, 1)
    second_of_a = at_once(keys["a"])  # the key's one long poll is taken
    assert second_of_a.status_code == 200 and second_of_a.json()["changes"] == []
    threads.append(threading.Thread(target=long_poll, args=(keys["b"],)))
    threads[1].start()
    until_waiting(api, ops, 2)
    first_of_c = at_once(keys["c"])  # the worker's two are taken
    assert first_of_c.status_code == 200 and first_of_c.json()["changes"] == []
    # Other routes answer meanwhile.
    page = httpx.get(f"{api.url}{PRODUCTS_LIST}", params={"count": 1}, headers=keys["c"])
    assert page.status_code == 200
    assert waiting(api, ops) == 2
    # A publish wakes the two held; their slots are free again.
    publish_altered_copy(
        HomeSettings(home=home).snapshots_dir, "DELETE FROM pairings WHERE relationship_id = "
        "(SELECT min(relationship_id) FROM pairings)",
    )  # fmt: skip
    for thread in threads:
        thread.join(timeout=WAIT_LIMIT_S)
        assert not thread.is_alive()
    assert [answer.status_code for answer in held] == [200, 200]
    until_waiting(api, ops, 0)
