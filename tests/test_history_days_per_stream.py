"""Retention per stream on the path users run: ``ductwork sync`` as a process against the
sandbox, with ``DUCTWORK_HISTORY_DAYS_LEADS`` shorter than ``DUCTWORK_HISTORY_DAYS``, then the
read API over the data folder.

Three syncs of the leads and the digital assets, each changing some of both upstream; between
the second and the third, the first two publishes are dated 40 days back in the warehouse's
history (the publish times are all the pruning reads), and the third runs with leads kept 30
days. Its publish drops the leads' versions and logged changes up to the publish current 30
days ago (the second), and nothing of the digital assets'; the leads' feed from a token of
the first publish and their past at it answer 410 as history no longer kept (and their TimeMap
starts at the horizon), while the digital assets' answer as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest

from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.sync import api_over, mutate

pytestmark = pytest.mark.timeout(900)

SEED = 53
STEPS = ("--select", "crm_leads", "--select", "crm_lead_details",
         "--select", "warehouse_digital_assets")  # fmt: skip
AT = "/_ductwork/v1/at"
CHANGES = "/_ductwork/v1/changes"
TIMEMAP = "/_ductwork/v1/timemap"
CHANGED = {"leads_changed": 20, "assets_updated": 20}


@dataclass(frozen=True)
class Aged:
    """The data folder after the three syncs, a read-API key, the versions of the three
    publishes, and feed tokens of both streams taken after the first."""

    home: Path
    key: str
    versions: list[str]
    first_tokens: dict[str, str]
    second_tokens: dict[str, str]


def synced(env: dict[str, str]) -> None:
    done = ductwork("sync", *STEPS, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def get(url: str, key: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(
        url + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def caught_up_tokens(home: Path, key: str) -> dict[str, str]:
    """A token of each stream naming the data folder's current snapshot."""
    tokens = {}
    with api_over(home, key) as api:
        for stream in ("leads", "digital-assets"):
            params = {"limit": "10000"}
            while True:
                body = get(api.url, key, f"{CHANGES}/{stream}", **params).json()
                if not body["hasMore"]:
                    tokens[stream] = body["next"]
                    break
                params = {"since": body["next"], "limit": "10000"}
    return tokens


def warehouse_rows(home: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        return con.execute(query).fetchall()


@pytest.fixture(scope="module")
def aged(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Aged]:
    home = tmp_path_factory.mktemp("history-days-per-stream")
    with object_store.sandbox(SEED, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        key = KeyFile(HomeSettings(home=home).keys_path).create("retention", ["all"])
        synced(env)
        first = caught_up_tokens(home, key)
        mutate(upstream, **CHANGED)
        synced(env)
        second = caught_up_tokens(home, key)
        with duckdb.connect(str(HomeSettings(home=home).warehouse_path)) as con:
            con.execute(
                "UPDATE history.publishes SET published_at = published_at - INTERVAL 40 DAY"
            )
        mutate(upstream, **CHANGED)
        synced({**env, "DUCTWORK_HISTORY_DAYS_LEADS": "30"})
        versions = [v for (v,) in warehouse_rows(home, "SELECT version FROM history.publishes "
                                                       "ORDER BY seq")]  # fmt: skip
        yield Aged(home, key, versions, first, second)


def test_the_leads_lose_their_versions_and_changes_before_their_horizon_and_no_other_stream_does(
    aged: Aged,
) -> None:
    assert len(aged.versions) == 3  # the publishes keep the default horizon
    assert warehouse_rows(aged.home, "SELECT stream, seq FROM history.horizons") == [("leads", 2)]
    for table in ("leads", "lead_details"):
        ended = warehouse_rows(aged.home, f"SELECT min(valid_to) FROM history.{table}")[0][0]
        assert ended is None or ended > 2, table  # only versions that ended at the third remain
    assert warehouse_rows(
        aged.home, "SELECT count(*) FROM history.feed_log WHERE stream = 'leads' AND seq <= 2"
    ) == [(0,)]  # fmt: skip
    assert warehouse_rows(
        aged.home, "SELECT count(*) FROM history.digital_assets WHERE valid_to = 2"
    )[0][0] > 0  # fmt: skip
    assert warehouse_rows(
        aged.home,
        "SELECT count(*) FROM history.feed_log WHERE stream = 'digital-assets' AND seq = 2",
    )[0][0] > 0  # fmt: skip


def test_the_leads_feed_and_past_before_their_horizon_answer_410_and_the_rest_still_answer(
    aged: Aged,
) -> None:
    first, second, _ = aged.versions
    with api_over(aged.home, aged.key) as api:
        gone = get(api.url, aged.key, f"{CHANGES}/leads", since=aged.first_tokens["leads"])
        walked = get(api.url, aged.key, f"{CHANGES}/leads", since=aged.second_tokens["leads"])
        assets = get(
            api.url, aged.key, f"{CHANGES}/digital-assets",
            since=aged.first_tokens["digital-assets"],
        )  # fmt: skip
        past_gone = get(api.url, aged.key, f"{AT}/{first}{LEADS}")
        past_kept = get(api.url, aged.key, f"{AT}/{second}{LEADS}")
        assets_past = get(api.url, aged.key, f"{AT}/{first}{DATA_WAREHOUSE_DIGITAL_ASSETS}")
        timemaps = {
            path: httpx.get(
                f"{api.url}{TIMEMAP}{path}",
                headers={"Authorization": f"Bearer {aged.key}", "Accept": "application/json"},
                timeout=60,
            ).json()
            for path in (LEADS, DATA_WAREHOUSE_DIGITAL_ASSETS)
        }
    for answer in (gone, past_gone):
        assert answer.status_code == 410, answer.text
        assert answer.json()["type"] == "/problems/history-unavailable"
    assert walked.status_code == 200, walked.text
    assert walked.json()["changes"]  # the third sync's lead changes
    assert assets.status_code == 200, assets.text
    assert {change["op"] for change in assets.json()["changes"]} >= {"upsert"}
    assert past_kept.status_code == 200, past_kept.text
    assert past_kept.json()["data"]
    assert assets_past.status_code == 200, assets_past.text
    # The leads' TimeMap starts at their horizon; the digital assets' at the oldest publish.
    listed = {path: [m["version"] for m in t["mementos"]] for path, t in timemaps.items()}
    assert listed == {
        LEADS: [second, aged.versions[2]],
        DATA_WAREHOUSE_DIGITAL_ASSETS: aged.versions,
    }


def test_a_diff_from_before_the_leads_horizon_leaves_the_leads_out_and_says_so(
    aged: Aged,
) -> None:
    first, _, third = aged.versions
    env = {**os.environ, "DUCTWORK_HOME": str(aged.home)}
    every = ductwork("diff", "--from", first, "--to", third, "--format", "json", env=env)
    assert every.returncode == 0, every.stderr
    assert "leads left out" in every.stderr
    diffed = {diff["stream"] for diff in json.loads(every.stdout)["streams"]}
    assert "digital-assets" in diffed and "leads" not in diffed
    leads = ductwork("diff", "--from", first, "--to", third, "--stream", "leads", env=env)
    assert leads.returncode == 1 and "leads left out" in leads.stderr
