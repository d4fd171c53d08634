"""The past costs what it weighs, and is refused before any of it is paid (serve/past.py,
serve/past_states.py), through ``ductwork serve`` as operators start it, over a data folder
with a history of several publishes.

Opening a past snapshot verifies and indexes a whole file, rebuilding one takes seconds: a
key without the scope of the path, or over its limit, is refused before either happens, a
rebuild counts as many units of the key's limit, one host rebuilds one snapshot at a time,
and the rebuilt snapshots stay within their disk budget.
"""

from __future__ import annotations

import fcntl
import math
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, PRODUCTS_LIST
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from serve.past_states import PAST_FOLDER, REBUILD_LOCK, disk_used
from tests.helpers.history import home_with_publishes
from tests.helpers.serve_process import serving_process

AT = "/_ductwork/v1/at"
MORE_PUBLISHES = 3


@pytest.fixture(scope="module")
def history_home(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the synced folder published ``MORE_PUBLISHES`` more times."""
    home = tmp_path_factory.mktemp("past-costs") / "home"
    home_with_publishes(synced_home, home, MORE_PUBLISHES)
    return home


@pytest.fixture
def only_history(history_home: Path, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A copy of ``history_home`` holding only its current snapshot file: every earlier
    version must be rebuilt from the history. Its versions, oldest first."""
    home = tmp_path / "home"
    snapshots_dir = HomeSettings(home=history_home).snapshots_dir
    target = HomeSettings(home=home).snapshots_dir
    target.mkdir(parents=True)
    current = snapshots.current(snapshots_dir)
    assert current is not None
    for path in snapshots_dir.iterdir():
        if path.name.startswith(current.path.name) or path.name == snapshots.POINTER:
            os.link(path, target / path.name)  # read-only use: a hard link is a copy here
    versions = sorted(
        snapshots.version_of(p.name)
        for p in snapshots_dir.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}")
    )
    yield home, versions


def keys_of(home: Path, **scopes: list[str]) -> dict[str, dict[str, str]]:
    """Bearer headers of new keys, by name, each with its scopes."""
    keys = KeyFile(HomeSettings(home=home).keys_path)
    return {
        name: {"Authorization": f"Bearer {keys.create(name, granted)}"}
        for name, granted in scopes.items()
    }


def rebuilt(home: Path) -> list[str]:
    """The versions rebuilt for the past on this host."""
    folder = HomeSettings(home=home).snapshots_dir / PAST_FOLDER
    return sorted(p.name for p in folder.glob(f"past-*{snapshots.SUFFIX}"))


def test_a_key_without_the_paths_scope_is_refused_each_past_version_before_any_is_opened(
    only_history: tuple[Path, list[str]],
) -> None:
    home, versions = only_history
    headers = keys_of(home, ops=["ops"], crm=["crm"])
    with serving_process(home, 1) as api, httpx.Client(timeout=60) as client:
        for _ in range(3):
            for version in versions[:-1]:
                for path in (PRODUCTS_LIST, DATA_WAREHOUSE_DIGITAL_ASSETS):
                    for key in ("ops", "crm"):
                        answer = client.get(f"{api.url}{AT}/{version}{path}", headers=headers[key])
                        # As the spec path refuses it: in its family's style.
                        assert answer.status_code == 403, answer.text
                        assert answer.json()["success"] is False, answer.text
        # The same through Accept-Datetime on the spec's own path.
        moment = "Thu, 01 Jan 2026 00:00:00 GMT"
        answer = client.get(
            f"{api.url}{PRODUCTS_LIST}", headers={**headers["ops"], "Accept-Datetime": moment}
        )
        assert answer.status_code == 403
    # Any answer from those versions would have rebuilt them: none was.
    assert rebuilt(home) == []


def test_a_key_whose_limit_cannot_take_a_rebuild_gets_429_and_nothing_is_rebuilt(
    only_history: tuple[Path, list[str]],
) -> None:
    home, versions = only_history
    keys = keys_of(home, spent=["all"], idle=["all"])
    asked = f"{AT}/{versions[0]}{PRODUCTS_LIST}?count=1"
    limits = {"DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000"}
    with serving_process(home, 1, limits) as api, httpx.Client(timeout=60) as client:
        # One unit spent: a rebuild weighs the whole second's limit, which no longer fits.
        present = client.get(f"{api.url}{PRODUCTS_LIST}?count=1", headers=keys["spent"])
        assert present.status_code == 200
        refused = client.get(api.url + asked, headers=keys["spent"])
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert int(refused.headers["retry-after"]) >= 1
        assert rebuilt(home) == []
        # The refused request cost nothing: the present still has room.
        present = client.get(f"{api.url}{PRODUCTS_LIST}?count=1", headers=keys["spent"])
        assert present.status_code == 200
        # A key with its whole second free may have the rebuild.
        answered = client.get(api.url + asked, headers=keys["idle"])
        assert answered.status_code == 200, answered.text
    assert rebuilt(home) == [f"past-{versions[0]}{snapshots.SUFFIX}"]


def test_a_rebuild_while_another_holds_the_hosts_rebuild_lock_is_503_with_retry_after(
    only_history: tuple[Path, list[str]],
) -> None:
    home, versions = only_history
    headers = keys_of(home, reader=["all"])["reader"]
    folder = HomeSettings(home=home).snapshots_dir / PAST_FOLDER
    folder.mkdir(mode=0o700)
    asked = f"{AT}/{versions[0]}{PRODUCTS_LIST}?count=1"
    with serving_process(home, 1) as api, httpx.Client(headers=headers, timeout=60) as client:
        held = os.open(folder / REBUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)  # as another worker of the host rebuilding
            refused = client.get(api.url + asked)
        finally:
            os.close(held)
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert int(refused.headers["retry-after"]) >= 1
        assert rebuilt(home) == []
        answered = client.get(api.url + asked)
        assert answered.status_code == 200, answered.text
        assert answered.headers["x-snapshot-version"] == versions[0]
    assert rebuilt(home) == [f"past-{versions[0]}{snapshots.SUFFIX}"]


def test_rebuilt_snapshots_stay_within_their_disk_budget_the_oldest_made_dropped_first(
    only_history: tuple[Path, list[str]],
) -> None:
    home, versions = only_history
    headers = keys_of(home, reader=["all"])["reader"]
    snapshots_dir = HomeSettings(home=home).snapshots_dir
    current = snapshots.current(snapshots_dir)
    assert current is not None
    # Room for about one rebuilt snapshot with its record file, not two.
    budget_mb = math.ceil(current.path.stat().st_size * 1.6 / (1 << 20))
    settings = {"DUCTWORK_SERVE_PAST_DISK_MB": str(budget_mb)}
    folder = snapshots_dir / PAST_FOLDER
    with serving_process(home, 1, settings) as api, httpx.Client(headers=headers) as client:
        for version in versions[:-1]:
            answer = client.get(
                f"{api.url}{AT}/{version}{DATA_WAREHOUSE_DIGITAL_ASSETS}", timeout=60
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-snapshot-version"] == version
            assert disk_used(folder) <= budget_mb << 20
    assert rebuilt(home) == [f"past-{versions[-2]}{snapshots.SUFFIX}"]
