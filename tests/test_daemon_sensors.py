"""The daemon's sensors on a data folder's instance on disk, through ``ductwork dev`` (the
webserver and a real Dagster daemon) as operators run it: the failed-run alert reaches its
webhook, and a subscriber that was down (or trickled its answer past the delivery's deadline)
is told later, in order, by the retry sensor, its cursor unmoved until it answered 2xx.
Removing either sensor from the Definitions fails here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from ductwork.settings import HomeSettings
from sandbox.local_server import free_socket
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import dagster_dev, ductwork, sync_env
from tests.helpers.sync import mutate
from tests.helpers.webhooks import Subscriber, subscriber_server, trickling_subscriber

START_LIMIT_S = 240
TICK_LIMIT_S = 120  # the daemon's first sensor pass, with room
RETRY_LIMIT_S = 150  # back-offs of 1, 2, 4 ... s after the syncs below, with room


@dataclass(frozen=True)
class Daemon:
    """``ductwork dev`` on a synced data folder, its environment and the alert's receiver."""

    home: Path
    env: dict[str, str]
    alerts: Subscriber


@pytest.fixture(scope="module")
def daemon(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Daemon, SandboxHandle]]:
    """A folder synced once from a sandbox of this module's own, then the webserver and the
    daemon on it (schedules off; sensors evaluated every second, back-off from 1 s)."""
    home = tmp_path_factory.mktemp("daemon-home")
    with object_store.sandbox(6262) as upstream, subscriber_server() as alerts:
        env = {
            **sync_env(home, upstream, object_store, UPSTREAM_KEY),
            "DUCTWORK_SCHEDULES": "off",
            "DUCTWORK_SENSOR_INTERVAL_S": "1",
            "DUCTWORK_WEBHOOK_BACKOFF_S": "1",
            "DUCTWORK_WEBHOOK_TIMEOUT_S": "2",
            "DUCTWORK_ALERT_WEBHOOK_URL": alerts.url,
        }
        first = ductwork("sync", env=env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        with dagster_dev(env, START_LIMIT_S):
            wait_for_ticks(home, ["alert_on_run_failure", "retry_change_notifications"])
            yield Daemon(home, env, alerts), upstream


def instance_of(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(HomeSettings(home=home).dagster_home))


def sensor_ticks(home: Path, name: str) -> list:
    """The ticks the daemon recorded for the sensor ``name``, newest first."""
    with instance_of(home) as instance:
        for state in instance.all_instigator_state():
            if state.instigator_name == name:
                return list(instance.get_ticks(state.instigator_origin_id, state.selector_id))
    return []


def wait_for_ticks(home: Path, names: list[str]) -> None:
    """Until the daemon has evaluated each sensor once (a run-failure sensor only sees the
    failures after its first pass)."""
    deadline = time.monotonic() + TICK_LIMIT_S
    while not all(sensor_ticks(home, name) for name in names):
        assert time.monotonic() < deadline, f"the daemon never evaluated {names}"
        time.sleep(0.5)  # polling for the daemon's pass, not timing it


def test_the_daemon_posts_the_failed_run_alert_to_its_webhook(
    daemon: tuple[Daemon, SandboxHandle],
) -> None:
    state, _ = daemon
    with free_socket() as sock:  # a port nothing listens on once the socket closes
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    failing = ductwork(
        "sync",
        "--select", "internal_contractors",
        env={**state.env, "DUCTWORK_UPSTREAM_URL": dead, "DUCTWORK_UPSTREAM_MAX_RETRIES": "0"},
    )  # fmt: skip
    assert failing.returncode == 1, failing.stdout[-2000:]
    with instance_of(state.home) as instance:
        failed = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    assert len(failed) == 1

    alert = state.alerts.wait_for(1, TICK_LIMIT_S)[0].body
    assert alert["run_id"] == failed[0].run_id and alert["job"] == failed[0].job_name
    assert dead.split("//")[1] not in str(alert)  # no address of the upstream either


def test_a_subscriber_down_then_up_is_told_in_order_by_the_retry_sensor(
    daemon: tuple[Daemon, SandboxHandle],
) -> None:
    state, upstream = daemon
    with subscriber_server() as subscriber:
        subscriber.status = 503
        added = ductwork(
            "subscriptions", "add", "hook", "--url", subscriber.url, "--stream", "digital-assets",
            env=state.env,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        subscriber.secret = added.stdout.strip().splitlines()[-1]
        for added_assets in (3, 2):  # two publishes while the subscriber is down
            mutate(upstream, assets_added=added_assets)
            synced = ductwork("sync", env=state.env)
            assert synced.returncode == 0, synced.stdout[-3000:]
        listed = ductwork("subscriptions", "list", env=state.env).stdout.split("\t")
        assert listed[3] == "told up to publish 1"  # the cursor waits for a 2xx
        assert listed[4].startswith("failing since ") and "answered 503" in listed[4]
        assert subscriber.received and not subscriber.acknowledged()

        subscriber.status = 204  # up again: only the daemon's sensor delivers from now on
        told = subscriber.wait_for(2, RETRY_LIMIT_S)

    assert len(told) == 2 and all(delivery.verified for delivery in told)
    # In order: the notification retried since the first failure is acknowledged first (its
    # id unchanged across retries), then the next publish's.
    assert told[0].message_id == subscriber.received[0].message_id
    assert told[1].message_id != told[0].message_id
    assert told[0].body["next"] != told[1].body["next"]
    assert [d.body["counts"]["upsert"] for d in told] == [3, 2]
    listed = ductwork("subscriptions", "list", env=state.env).stdout.split("\t")
    assert listed[3] == "told up to publish 3 digital-assets" and listed[4].strip() == "active"
    skipped = [
        tick.skip_reason or "" for tick in sensor_ticks(state.home, "retry_change_notifications")
    ]
    # The sensor's ticks (what the Dagster UI shows of it) say it delivered them.
    assert any(reason.split()[0] in {"1", "2"} and "delivered" in reason for reason in skipped)


def subscription_row(env: dict[str, str], name: str) -> list[str]:
    """The subscription's line of ``ductwork subscriptions list``, split at its tabs."""
    listed = ductwork("subscriptions", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    return next(row for row in rows if row[0] == name)


def test_a_subscriber_trickling_its_headers_fails_and_is_told_by_the_sensor_once_it_answers(
    daemon: tuple[Daemon, SandboxHandle],
) -> None:
    state, upstream = daemon
    with trickling_subscriber() as trickler:
        added = ductwork(
            "subscriptions", "add", "trickling", "--url", trickler.url,
            "--stream", "digital-assets", env=state.env,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        cursor = subscription_row(state.env, "trickling")[3]
        mutate(upstream, assets_added=2)
        synced = ductwork("sync", env=state.env)
        assert synced.returncode == 0, synced.stdout[-3000:]
        # The run's step or the sensor, whichever took the subscriber's lock, cut it off.
        deadline = time.monotonic() + TICK_LIMIT_S
        while not (row := subscription_row(state.env, "trickling"))[4].startswith("failing"):
            assert time.monotonic() < deadline, row
            time.sleep(0.5)  # polling for the failure to be recorded, not timing it
        assert "no answer within" in row[4]
        assert row[3] == cursor  # unmoved

        trickler.answer = True  # well-behaved from now on: only the sensor delivers
        told = trickler.wait_for(1, RETRY_LIMIT_S)

    assert told[0].startswith("msg_")
    row = subscription_row(state.env, "trickling")
    assert row[3] != cursor and row[3].endswith(" digital-assets")
    assert row[4].strip() == "active"
