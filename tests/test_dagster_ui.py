"""The Dagster UI, as an operator's browser renders it, shows what a CLI sync did."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from pipelines.definitions import defs
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.browser import rendered_dom, screenshot
from tests.helpers.cli import dagster_dev, ductwork, sync_env

ROOT = Path(__file__).parent.parent
# The UI is a React app that fetches over GraphQL: give it plenty of virtual time.
WAIT_MS = 40_000
UI_START_TIMEOUT_S = 240


@dataclass(frozen=True)
class Ui:
    """The running UI and the data folder it shows."""

    url: str
    home: Path


def look(url: str, png: Path, size: str = "1600,2400") -> str:
    """The rendered DOM of ``url``; a screenshot of it is saved to ``png``."""
    screenshot(url, png, size=size, wait_ms=WAIT_MS, timeout_s=180)
    return rendered_dom(url, size=size, wait_ms=WAIT_MS, timeout_s=180)


@pytest.fixture(scope="module")
def ui(
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Ui]:
    """``ductwork dev`` on an instance that one ``ductwork sync`` of the catalog filled."""
    home = tmp_path_factory.mktemp("ui-home")
    env = {
        **sync_env(home, upstream, object_store, UPSTREAM_KEY),
        "DUCTWORK_SCHEDULES": "off",  # the pages show the CLI's run alone
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    synced = ductwork("sync", "--select", "group:catalog", env=env)
    assert synced.returncode == 0, synced.stderr[-3000:]
    with dagster_dev(env, UI_START_TIMEOUT_S) as url:
        yield Ui(url, home)


def test_the_asset_list_shows_every_asset(ui: Ui, tmp_path: Path) -> None:
    dom = look(f"{ui.url}/assets", tmp_path / "assets.png", size="1600,3000")
    names = sorted(key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys())
    missing = [name for name in names if name not in dom]
    assert not missing, f"asset list lacks {missing}; screenshot in {tmp_path}"


def test_an_asset_page_shows_the_cli_runs_row_count_and_its_checks(ui: Ui, tmp_path: Path) -> None:
    with duckdb.connect(str(ui.home / "warehouse.duckdb"), read_only=True) as con:
        (rows,) = con.execute("SELECT count(*) FROM catalog_items").fetchone()
    dom = look(f"{ui.url}/assets/catalog_items", tmp_path / "catalog_items.png")
    assert "Row count" in dom and f"{rows:,}" in dom, f"see {tmp_path}"
    dom = look(f"{ui.url}/assets/catalog_items?view=checks", tmp_path / "catalog_items_checks.png")
    for check in (
        "catalog_items_keys_unique_and_present",
        "catalog_items_no_large_shrink",
    ):
        assert check in dom, f"{check} not on the checks tab; see {tmp_path}"
