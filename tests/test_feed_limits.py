"""The changes feed costs what it reads: a page weighs by the entries it asks for, as a list
page does by its records (serve/deps.py).

The page's cost is per process: tested on the app served in-process on loopback.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import serving
from serve.app import create_app
from tests.conftest import home_with_published_snapshot

CHANGES = "/_ductwork/v1/changes/"


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
