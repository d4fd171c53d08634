"""Change notifications through the commands operators run: ``ductwork subscriptions`` and
``ductwork sync`` on a data folder's instance on disk, a real subscriber on loopback verifying
every delivery with the ``standardwebhooks`` package, a subscriber that never answers and one
that trickles its answer's headers a byte at a time.

The retries (and the failed-run alert) through a real Dagster daemon are in
``tests/test_daemon_sensors.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from ductwork import serving_workers, snapshots
from ductwork.history import feed, feed_entries
from ductwork.notifications.delivery import (
    MAX_PARALLEL,
    Notification,
    Plan,
    deliver,
    pending,
    tell_now,
)
from ductwork.notifications.subscriptions import Subscription, SubscriptionStore, backoff_s
from ductwork.settings import HomeSettings, NotificationSettings
from ductwork.streams.registry import PAIRINGS
from ductwork.warehouse.schema import schema_sql
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.sync import mutate
from tests.helpers.webhooks import silent_subscriber, subscriber_server, trickling_subscriber

SYNC_LIMIT_S = 600
TIMEOUT_S = 2.0  # DUCTWORK_WEBHOOK_TIMEOUT_S in these tests
# Beyond the timeout: the step's own work (opening the snapshot, the subscriptions file) ...
STEP_SLACK_S = 2.0
# ... and from the publish to the process's exit, the run's end too, on a busy machine.
EXIT_SLACK_S = 10.0
CLOSE_LIMIT_S = 10.0


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
        "DUCTWORK_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S),
    }


def subscribe(env: dict[str, str], name: str, url: str, *streams: str) -> str:
    """``ductwork subscriptions add``; the secret it printed as its last line."""
    args = [arg for stream in streams for arg in ("--stream", stream)]
    done = ductwork("subscriptions", "add", name, "--url", url, *args, env=env)
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip().splitlines()[-1]
    assert secret.startswith("whsec_")
    return secret


def sync(env: dict[str, str]) -> float:
    """``ductwork sync`` as a process; when it exited (wall clock)."""
    done = ductwork("sync", env=env, timeout=SYNC_LIMIT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return time.time()


def step_times(env: dict[str, str]) -> dict[str, tuple[float, float]]:
    """When each step of the folder's latest run started and succeeded (wall clock)."""
    dagster_home = HomeSettings(home=Path(env["DUCTWORK_HOME"])).dagster_home
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        [run] = instance.get_runs(limit=1)
        events = instance.all_logs(run.run_id)
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    for event in events:
        kind = event.dagster_event_type
        if kind == dg.DagsterEventType.STEP_START:
            started[str(event.step_key)] = event.timestamp
        elif kind == dg.DagsterEventType.STEP_SUCCESS:
            ended[str(event.step_key)] = event.timestamp
    return {step: (started[step], ended[step]) for step in ended}


def assert_delayed_one_timeout_at_most(env: dict[str, str], exited: float) -> None:
    """The notification step of the latest run took one delivery timeout (and its own work),
    and the process exited within about that long after the publish."""
    steps = step_times(env)
    started, ended = steps["change_notifications"]
    assert ended - started <= TIMEOUT_S + STEP_SLACK_S, steps
    assert exited - steps["serving_snapshot"][1] <= TIMEOUT_S + EXIT_SLACK_S, steps


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
        exited = sync(env)
        answered = subscriber.acknowledged()

    assert_delayed_one_timeout_at_most(env, exited)
    assert [d.body["stream"] for d in answered] == ["digital-assets"]
    assert answered[0].verified
    rows = listed(env)
    assert rows["silent"][-1].startswith("paused since ")
    assert "no answer within" in rows["silent"][-1]
    # The first folder's sync was publish 1: the silent one's cursor did not move past it.
    assert rows["silent"][3] == "told up to publish 1"
    assert rows["answering"][3] == "told up to publish 2 digital-assets"
    metadata = latest_metadata(env, "change_notifications")
    assert metadata["paused"] == "silent" and metadata["delivered"] == 1
    # Nothing of the subscriber's address reaches the Dagster UI.
    assert silent_url.split("//")[1] not in json.dumps(metadata, default=str)


def test_a_subscriber_trickling_its_headers_delays_the_publishing_run_one_timeout_at_most(
    env: dict[str, str], notifying_upstream: SandboxHandle
) -> None:
    with subscriber_server() as subscriber, trickling_subscriber() as trickler:
        subscriber.secret = subscribe(env, "answering", subscriber.url, "digital-assets")
        subscribe(env, "trickling", trickler.url, "digital-assets")
        mutate(notifying_upstream, assets_added=2)
        exited = sync(env)
        answered = subscriber.acknowledged()

    # A byte every half second kept every read alive; the exchange's deadline cut it off.
    assert_delayed_one_timeout_at_most(env, exited)
    assert [d.body["stream"] for d in answered] == ["digital-assets"]
    rows = listed(env)
    assert rows["trickling"][3] == "told up to publish 1"  # the cursor did not move
    assert rows["trickling"][-1].startswith("failing since ")
    assert "no answer within" in rows["trickling"][-1]
    assert rows["answering"][3] == "told up to publish 2 digital-assets"
    metadata = latest_metadata(env, "change_notifications")
    assert metadata["failing"] == "trickling" and metadata["delivered"] == 1


def test_a_delivery_to_a_trickling_subscriber_ends_at_its_deadline_and_closes_its_connection(
    tmp_path: Path,
) -> None:
    store = SubscriptionStore(tmp_path)
    note = Notification(1, "v1", "leads", 1, 0, None, "next")
    settings = NotificationSettings(webhook_timeout_s=1.0)
    with trickling_subscriber(byte_every_s=0.2) as trickler:
        subscription = store.add("trickling", trickler.url, ["leads"], 0)
        started = time.monotonic()
        outcome = tell_now(store, subscription, [note], settings, started + 60)
        took = time.monotonic() - started
        # Closed by the delivery itself (this process lives on): seen at the next byte sent.
        trickler.wait_until_closed(1, CLOSE_LIMIT_S)
    assert outcome.state == "failing" and outcome.error == "no answer within 1.0 s"
    assert 1.0 <= took <= 1.0 + STEP_SLACK_S
    assert store.get("trickling").cursor_seq == 0


def test_a_pass_over_more_trickling_subscribers_than_are_told_at_once_ends_within_its_budget(
    tmp_path: Path,
) -> None:
    store = SubscriptionStore(tmp_path)
    note = Notification(1, "v1", "leads", 1, 0, None, "next")
    settings = NotificationSettings(webhook_timeout_s=1.0)
    count = MAX_PARALLEL + 4
    with trickling_subscriber(byte_every_s=0.2) as trickler:
        for n in range(count):
            store.add(f"t{n:02d}", trickler.url, ["leads"], 0)
        planned = Plan(work=[(sub, [note]) for sub in store.all()], not_due=[])
        started = time.monotonic()
        outcomes = deliver(store, planned, settings, budget_s=1.0)
        took = time.monotonic() - started
    assert took <= 1.0 + STEP_SLACK_S
    states = {outcome.name: outcome.state for outcome in outcomes}
    # Those whose turn came had the timeout and failed; those whose turn came too late are
    # left for the next pass, counted against no one.
    assert set(states.values()) == {"failing", "more"}
    assert list(states.values()).count("more") >= count - MAX_PARALLEL
    not_failing = {sub.name for sub in store.all() if sub.failing_since is None}
    assert not_failing == {name for name, state in states.items() if state == "more"}


def test_a_sync_notifies_after_its_wait_for_local_workers_naming_those_still_behind(
    env: dict[str, str], notifying_upstream: SandboxHandle
) -> None:
    env = {**env, "DUCTWORK_WEBHOOK_SERVED_WAIT_S": "1"}
    snapshots_dir = HomeSettings(home=Path(env["DUCTWORK_HOME"])).snapshots_dir
    # A read-API worker as ``ductwork serve`` announces one: a live pid, the version it serves.
    worker = subprocess.Popen(["sleep", "600"])
    try:
        serving_workers.announce(snapshots_dir, "0", worker.pid)
        with subscriber_server() as subscriber:
            subscriber.secret = subscribe(env, "hook", subscriber.url, "digital-assets")
            mutate(notifying_upstream, assets_added=1)
            sync(env)
            got = subscriber.acknowledged()
    finally:
        worker.kill()
        worker.wait()

    assert [d.body["stream"] for d in got] == ["digital-assets"]  # delivered anyway
    metadata = latest_metadata(env, "change_notifications")
    assert metadata["workers_behind"] == f"pid {worker.pid} serves 0"
    assert 1.0 <= float(metadata["workers_wait_s"]) < 1.0 + STEP_SLACK_S


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

        def read_since(note: Notification) -> list[feed_entries.Change]:
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
