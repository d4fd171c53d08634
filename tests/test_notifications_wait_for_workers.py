"""A publish's notifications leave once this host's read-API workers serve it: on a data folder
published by hand, with workers as ``ductwork serve`` announces them (a file per pid under
``snapshots/.serving/``, the pid a live process) and a real subscriber on loopback.

Through ``ductwork sync`` as a process: ``tests/test_change_notifications.py``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from assets.notifications import notify_publish, workers_text
from ductwork import serving_workers, snapshots
from ductwork.notifications.delivery import head_seq
from ductwork.notifications.subscriptions import SubscriptionStore
from ductwork.settings import HomeSettings
from ductwork.streams.registry import PAIRINGS
from ductwork.warehouse.schema import schema_sql
from tests.helpers.webhooks import Subscriber, subscriber_server

OLDER = "0"  # a version older than any publish's
ANSWER_LIMIT_S = 10.0


@pytest.fixture
def home(tmp_path: Path) -> HomeSettings:
    """A data folder with two publishes, the second of which changed the pairing."""
    settings = HomeSettings(home=tmp_path)
    with duckdb.connect(str(settings.warehouse_path)) as con:
        con.execute(schema_sql())
        for n in (1, 2):
            con.execute("DELETE FROM pairings")
            con.execute(
                "INSERT INTO pairings VALUES (1, 'Pairing', now(), ?, now())",
                [f'{{"relationshipId":1,"n":{n}}}'],
            )
            snapshots.publish(con, settings.snapshots_dir)
    return settings


@pytest.fixture
def subscriber(home: HomeSettings) -> Iterator[Subscriber]:
    """A subscriber to the pairings told of the first publish, not of the second."""
    with subscriber_server() as server:
        added = SubscriptionStore(home.notifications_dir).add(
            "hook", server.url, [PAIRINGS.name], 1
        )
        server.secret = added.secret
        yield server


@contextmanager
def worker_serving(home: HomeSettings, version: str) -> Iterator[int]:
    """A live process announced as a read-API worker serving ``version``; its pid."""
    process = subprocess.Popen(["sleep", "300"])
    try:
        serving_workers.announce(home.snapshots_dir, version, process.pid)
        yield process.pid
    finally:
        process.kill()
        process.wait()


def published_version(home: HomeSettings) -> str:
    current = snapshots.current(home.snapshots_dir)
    assert current is not None
    return current.version


def test_notifications_leave_only_once_every_local_worker_serves_the_publish(
    home: HomeSettings, subscriber: Subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCTWORK_WEBHOOK_SERVED_WAIT_S", "30")
    version = published_version(home)
    with (
        worker_serving(home, version),
        worker_serving(home, OLDER) as late,
        ThreadPoolExecutor(1) as pool,
    ):
        notifying = pool.submit(notify_publish, home)
        # Still waiting for the worker behind, nothing sent (a bounded look, not a pause).
        done, _ = wait([notifying], timeout=0.5)
        assert not done and subscriber.received == []
        serving_workers.announce(home.snapshots_dir, version, late)
        told = notifying.result(timeout=ANSWER_LIMIT_S)

    assert told.behind == {} and told.waited_s < ANSWER_LIMIT_S
    [delivery] = subscriber.acknowledged()
    assert delivery.verified and delivery.body["stream"] == PAIRINGS.name
    assert [outcome.state for outcome in told.outcomes] == ["told"]


def test_notifications_leave_after_the_wait_naming_the_workers_still_behind(
    home: HomeSettings, subscriber: Subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCTWORK_WEBHOOK_SERVED_WAIT_S", "0.5")
    version = published_version(home)
    gone = subprocess.Popen(["true"])
    gone.wait()
    serving_workers.announce(home.snapshots_dir, OLDER, gone.pid)  # died without withdrawing
    with worker_serving(home, version), worker_serving(home, OLDER) as late:
        started = time.monotonic()
        told = notify_publish(home)
        took = time.monotonic() - started

    assert told.behind == {late: OLDER}  # neither the one up to date nor the dead one
    assert workers_text(told.behind) == f"pid {late} serves {OLDER}"
    assert 0.5 <= told.waited_s <= took < ANSWER_LIMIT_S
    assert len(subscriber.acknowledged()) == 1  # delivered anyway


def test_a_publish_with_nothing_to_tell_waits_for_no_worker(
    home: HomeSettings, subscriber: Subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCTWORK_WEBHOOK_SERVED_WAIT_S", "30")
    store = SubscriptionStore(home.notifications_dir)
    _, con = snapshots.open_current(home.snapshots_dir)
    with con:
        store.rewind("hook", head_seq(con))  # already told of the publish
    with worker_serving(home, OLDER):
        told = notify_publish(home)
    assert told.behind == {} and told.waited_s < 1.0
    assert subscriber.received == []
