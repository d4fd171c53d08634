"""Change notifications through the commands operators run: ``ductwork subscriptions`` and
``ductwork sync`` on a data folder's instance on disk, a real subscriber on loopback verifying
every delivery with the ``standardwebhooks`` package, and a subscriber that never answers.

The retries (and the failed-run alert) through a real Dagster daemon are in
``tests/test_daemon_sensors.py``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from ductwork import snapshots
from ductwork.history import feed
from ductwork.notifications.delivery import Notification, pending
from ductwork.notifications.subscriptions import Subscription, SubscriptionStore, backoff_s
from ductwork.settings import HomeSettings
from ductwork.streams.registry import PAIRINGS
from ductwork.warehouse.schema import schema_sql
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.sync import mutate
from tests.helpers.webhooks import silent_subscriber, subscriber_server

SYNC_LIMIT_S = 600


@pytest.fixture(scope="module")
def notifying_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of this module's own, changed by its tests."""
    with object_store.sandbox(5151) as handle:
        yield handle


@pytest.fixture(scope="module")
def first_synced(
    notifying_upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A data folder after its first ``ductwork sync``; each test works on a copy."""
    home = tmp_path_factory.mktemp("notify-base")
    done = ductwork("sync", env=sync_env(home, notifying_upstream, object_store, UPSTREAM_KEY))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return home


@pytest.fixture
def env(
    first_synced: Path,
    notifying_upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> dict[str, str]:
    """The environment of a copy of the first-synced folder (one delivery attempt takes at
    most 2 s here)."""
    home = tmp_path / "home"
    shutil.copytree(first_synced, home, symlinks=True)
    return {
        **sync_env(home, notifying_upstream, object_store, UPSTREAM_KEY),
        "DUCTWORK_WEBHOOK_TIMEOUT_S": "2",
    }


def subscribe(env: dict[str, str], name: str, url: str, *streams: str) -> str:
    """``ductwork subscriptions add``; the secret it printed as its last line."""
    args = [arg for stream in streams for arg in ("--stream", stream)]
    done = ductwork("subscriptions", "add", name, "--url", url, *args, env=env)
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip().splitlines()[-1]
    assert secret.startswith("whsec_")
    return secret


def sync(env: dict[str, str]) -> None:
    done = ductwork("sync", env=env, timeout=SYNC_LIMIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def listed(env: dict[str, str]) -> dict[str, list[str]]:
    """``ductwork subscriptions list``, by name."""
    done = ductwork("subscriptions", "list", env=env)
    assert done.returncode == 0, done.stderr
    return {line.split("\t")[0]: line.split("\t") for line in done.stdout.splitlines()}


def feed_lines(env: dict[str, str], stream: str, since: str | None) -> list[dict]:
    """``ductwork changes STREAM --since TOKEN``: every change of the walk."""
    args = ["changes", stream] + ([] if since is None else ["--since", since])
    done = ductwork(*args, env=env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def latest_metadata(env: dict[str, str], asset: str) -> dict[str, object]:
    """The metadata of the asset's latest materialization on the folder's instance."""
    dagster_home = HomeSettings(home=Path(env["DUCTWORK_HOME"])).dagster_home
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None and event.asset_materialization is not None
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def test_a_subscriber_added_before_a_sync_has_verified_deliveries_when_the_sync_exits(
    env: dict[str, str], notifying_upstream: SandboxHandle
) -> None:
    with subscriber_server() as subscriber:
        subscriber.secret = subscribe(
            env, "hook", subscriber.url, "products", "digital-assets", "contractors"
        )
        mutate(notifying_upstream, products_changed=15, assets_added=4)
        sync(env)
        got = subscriber.acknowledged()

    by_stream = {delivery.body["stream"]: delivery for delivery in got}
    assert set(by_stream) == {"products", "digital-assets"}, got  # contractors did not change
    assert all(delivery.verified for delivery in got)
    assert [d.body["stream"] for d in got] == ["digital-assets", "products"]  # (publish, stream)
    for stream, delivery in by_stream.items():
        body = delivery.body
        assert list(body) == ["type", "stream", "since", "next", "counts"]
        assert body["type"] == "ductwork.changes"
        assert "record" not in json.dumps(body)  # a pointer, never the records
        # The notification points at exactly the changes the feed gives between its tokens.
        changes = feed_lines(env, stream, body["since"])
        assert body["counts"] == {
            "upsert": sum(1 for change in changes if change["op"] == "upsert"),
            "delete": sum(1 for change in changes if change["op"] == "delete"),
        }
        assert body["counts"]["upsert"] > 0
        assert feed_lines(env, stream, body["next"]) == []  # caught up at the publish

    # The run that published delivered: its step's metadata says so, and the cursor moved.
    metadata = latest_metadata(env, "change_notifications")
    assert metadata["delivered"] == 2 and metadata["paused"] == "none"
    assert listed(env)["hook"][-1] == "active"


def test_a_subscriber_that_never_answers_is_paused_and_holds_up_no_other(
    env: dict[str, str], notifying_upstream: SandboxHandle
) -> None:
    env = {**env, "DUCTWORK_WEBHOOK_GIVE_UP_S": "0"}  # the first failure is already too long
    with subscriber_server() as subscriber, silent_subscriber() as silent_url:
        subscriber.secret = subscribe(env, "answering", subscriber.url, "digital-assets")
        subscribe(env, "silent", silent_url, "digital-assets")
        mutate(notifying_upstream, assets_added=3)
        sync(env)  # bounded by the delivery timeout: the test's own limit would fail it
        answered = subscriber.acknowledged()

    assert [d.body["stream"] for d in answered] == ["digital-assets"]
    assert answered[0].verified
    rows = listed(env)
    assert rows["silent"][-1].startswith("paused since ")
    assert "not reached (ReadTimeout)" in rows["silent"][-1]
    # The first folder's sync was publish 1: the silent one's cursor did not move past it.
    assert rows["silent"][3] == "told up to publish 1"
    assert rows["answering"][3] == "told up to publish 2 digital-assets"
    metadata = latest_metadata(env, "change_notifications")
    assert metadata["paused"] == "silent" and metadata["delivered"] == 1
    # Nothing of the subscriber's address reaches the Dagster UI.
    assert silent_url.split("//")[1] not in json.dumps(metadata, default=str)


def test_replay_delivers_the_same_notifications_again_in_order_and_resumes_a_paused_one(
    env: dict[str, str], notifying_upstream: SandboxHandle
) -> None:
    with subscriber_server() as subscriber:
        subscriber.secret = subscribe(env, "hook", subscriber.url, "digital-assets", "products")
        mutate(notifying_upstream, assets_added=2)
        sync(env)
        told_once = len(subscriber.acknowledged())
        mutate(notifying_upstream, assets_added=2, products_changed=3)
        sync(env)
        first = subscriber.acknowledged()
        # Each publish's streams in name order (the upstream may carry earlier tests' changes).
        assert told_once >= 1 and first[0].body["stream"] == "digital-assets"
        assert [d.body["stream"] for d in first[told_once:]] == ["digital-assets", "products"]

        replayed = ductwork(
            "subscriptions", "replay", "hook", "--since", first[0].body["since"], env=env
        )
        assert replayed.returncode == 0, replayed.stderr
        assert f"replayed {len(first)} notification(s)" in replayed.stdout
        again = subscriber.acknowledged()[len(first) :]

        # The same messages (ids and bodies), in the same order, each verified again.
        assert [(d.message_id, d.body) for d in again] == [(d.message_id, d.body) for d in first]
        assert all(d.verified for d in again)

        # A subscriber failing is paused by the give-up time; a replay resumes it.
        subscriber.status = 503
        mutate(notifying_upstream, assets_added=1)
        sync({**env, "DUCTWORK_WEBHOOK_GIVE_UP_S": "0"})
        assert listed(env)["hook"][-1].startswith("paused since ")
        subscriber.status = 200
        token = first[-1].body["next"]
        resumed = ductwork("subscriptions", "replay", "hook", "--since", token, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert listed(env)["hook"][-1] == "active"


def test_subscriptions_refuse_bad_input_in_one_line(env: dict[str, str]) -> None:
    cases = [
        (["add", "x", "--url", "ftp://example.com/", "--stream", "leads"], "http:// or https://"),
        (["add", "x", "--url", "http://127.0.0.1:9/", "--stream", "nope"], "unknown stream"),
        (["add", "bad name", "--url", "http://127.0.0.1:9/", "--stream", "leads"], "name is"),
        (["remove", "absent"], "no subscription named"),
        (["replay", "absent", "--since", "x.y"], "no subscription named"),
    ]
    for args, message in cases:
        done = ductwork("subscriptions", *args, env=env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    subscribe(env, "dup", "http://127.0.0.1:9/", "leads")
    again = ductwork(
        "subscriptions", "add", "dup", "--url", "http://127.0.0.1:9/", "--stream", "leads", env=env
    )
    assert again.returncode == 2 and "exists" in again.stderr
    token = ductwork("subscriptions", "replay", "dup", "--since", "not-a-token", env=env)
    assert token.returncode == 2 and "not a token of this mirror" in token.stderr
    removed = ductwork("subscriptions", "remove", "dup", env=env)
    assert removed.returncode == 0 and listed(env) == {}


def test_the_back_off_doubles_up_to_an_hour_and_a_body_names_its_stream_tokens_and_counts() -> None:
    # Unit test of two pure functions (no server needed to prove them).
    assert [backoff_s(n, 30) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert backoff_s(20, 30) == 3600
    store = SubscriptionStore(Path("/nonexistent"))
    assert store.all() == []
    note = Notification(3, "v3", "leads", 1, 0, "a", "b")
    body = json.loads(note.body())
    assert body == {
        "type": "ductwork.changes", "stream": "leads", "since": "a", "next": "b",
        "counts": {"upsert": 1, "delete": 0},
    }  # fmt: skip


def test_a_subscriber_behind_the_history_kept_is_told_from_its_own_position_which_the_feed_refuses(
    tmp_path: Path,
) -> None:
    # On snapshots published by hand (no subscriber needed: what is proved is the body's
    # ``since``): three publishes of one pairing, the third keeping next to nothing, so the
    # changes of the first two are gone and the oldest publish kept is the second.
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    con.execute(schema_sql())
    folder = tmp_path / "snapshots"
    for n, keep in ((1, timedelta(days=90)), (2, timedelta(days=90)), (3, timedelta(0, 0, 1))):
        con.execute("DELETE FROM pairings")
        con.execute(
            "INSERT INTO pairings VALUES (1, 'Pairing', now(), ?, now())",
            [f'{{"relationshipId":1,"n":{n}}}'],
        )
        snapshots.publish(con, folder, keep)
    subscription = Subscription(
        "behind", "sub1", "http://127.0.0.1:9/", (PAIRINGS.name,), "whsec_x", "", 1, None,
        None, 0, None, None, None,
    )  # fmt: skip
    _, snapshot = snapshots.open_current(folder)
    with snapshot:
        mirror = feed.mirror_id(snapshot)

        def read_since(note: Notification) -> list[feed.Change]:
            assert note.since is not None
            position = feed.decode_token(note.since, mirror)
            return feed.read_page(snapshot, PAIRINGS.name, PAIRINGS.sql, position, 100).changes

        [behind] = pending(snapshot, subscription)
        assert behind.seq == 3
        with pytest.raises(feed.HistoryGone):  # the feed's 410: the subscriber reloads
            read_since(behind)
        [caught_up] = pending(snapshot, replace(subscription, cursor_seq=2))
        assert [change.key for change in read_since(caught_up)] == ["1"]
        [fresh] = pending(snapshot, replace(subscription, cursor_seq=0))
        assert fresh.since is None  # told nothing yet: load everything
