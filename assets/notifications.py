"""Change notifications, delivered by the run that published: the step after the publish.

The step first waits for this host's read-API workers to serve the publish (a subscriber told
of changes reads them next), at most ``DUCTWORK_WEBHOOK_SERVED_WAIT_S``; its deliveries then
end within ``DUCTWORK_WEBHOOK_TIMEOUT_S``. So the step lasts at most the sum of the two, and
subscribers, whatever they do, account for the second only.
"""

# No ``from __future__ import annotations``: Dagster reads the ``context`` annotation as an object.
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from assets.ingest import OWNERS
from assets.publish import serving_snapshot
from assets.resources import DataHome
from ductwork import serving_workers, snapshots
from ductwork.notifications.delivery import Outcome, deliver, deliver_all, plan, summary
from ductwork.notifications.subscriptions import SubscriptionStore
from ductwork.settings import HomeSettings, NotificationSettings, load

# The steps of every publish, in order: the snapshot, then the notifications of its changes.
PUBLISH_ASSETS = ("serving_snapshot", "change_notifications")
# How long a delivery pass may last, in timeouts of one delivery. The publishing run's pass
# ends within one: whatever its subscribers do, they delay the run by one timeout at most, and
# what is left goes to the retry sensor, whose passes may take longer (within the minute
# Dagster gives a sensor's evaluation).
RUN_BUDGET_IN_TIMEOUTS = 1
SENSOR_BUDGET_IN_TIMEOUTS = 4


@dg.asset(
    group_name="serving",
    kinds={"webhook"},
    owners=OWNERS,
    deps=[serving_snapshot],
    description=(
        "Signed POSTs to the subscribers of every stream this publish changed (ductwork "
        "subscriptions): a pointer into the changes feed per stream, in order, each subscriber's "
        "cursor moved on a 2xx only. They leave once every local ductwork serve worker serves "
        "the publish (DUCTWORK_WEBHOOK_SERVED_WAIT_S at most; workers still behind are named in "
        "the metadata), and all end within DUCTWORK_WEBHOOK_TIMEOUT_S. What a failing subscriber "
        "missed is retried by the sensor retry_change_notifications; a subscriber failing for "
        "DUCTWORK_WEBHOOK_GIVE_UP_S is paused, as this step's metadata shows."
    ),
)
def change_notifications(
    context: dg.AssetExecutionContext, data_home: DataHome
) -> dg.MaterializeResult:
    """Deliver what the newly published snapshot's history has for each subscription, once the
    local read-API workers serve it."""
    told = notify_publish(HomeSettings(home=Path(data_home.path)))
    if told.behind:
        context.log.warning(
            f"notifying although {len(told.behind)} local read-API worker(s) still serve an "
            f"older snapshot than {told.version} after {told.waited_s:.1f} s: "
            f"{workers_text(told.behind)}"
        )
    context.log.info(summary(told.outcomes))
    return dg.MaterializeResult(
        metadata={
            **outcome_metadata(told.outcomes),
            "workers_behind": workers_text(told.behind) or "none",
            "workers_wait_s": round(told.waited_s, 3),
        }
    )


@dataclass(frozen=True)
class PublishNotified:
    """The publishing run's delivery pass: its outcomes, and the local read-API workers still
    serving a snapshot older than the publish ``version`` (pid: version) after ``waited_s``."""

    version: str | None
    outcomes: list[Outcome]
    behind: dict[int, str]
    waited_s: float


def notify_publish(home: HomeSettings) -> PublishNotified:
    """Tell the subscribers of the data folder ``home`` what the current snapshot's history has
    for them, after waiting (``DUCTWORK_WEBHOOK_SERVED_WAIT_S`` at most) for every local worker
    of ``ductwork serve`` to serve that snapshot, so a subscriber woken by a notification reads
    the new data from this host's API. The deliveries end within one delivery timeout."""
    store = SubscriptionStore(home.notifications_dir)
    if not store.all():
        return PublishNotified(None, [], {}, 0.0)
    settings = load(NotificationSettings)
    snapshot, con = snapshots.open_current(home.snapshots_dir)
    with con:
        planned = plan(store, con)
    behind: dict[int, str] = {}
    started = time.monotonic()
    if planned.has_news():
        behind = serving_workers.wait_until_served(
            home.snapshots_dir, snapshot.version, settings.webhook_served_wait_s
        )
    waited_s = time.monotonic() - started
    budget_s = RUN_BUDGET_IN_TIMEOUTS * settings.webhook_timeout_s
    outcomes = deliver(store, planned, settings, budget_s)
    return PublishNotified(snapshot.version, outcomes, behind, waited_s)


def workers_text(behind: dict[int, str]) -> str:
    """The workers behind, as a log line or the metadata names them: pid and version served."""
    return ", ".join(f"pid {pid} serves {version}" for pid, version in sorted(behind.items()))


def deliver_pending(home: HomeSettings, budget_in_timeouts: float) -> list[Outcome]:
    """One delivery pass over the subscriptions of the data folder ``home``, ended within
    ``budget_in_timeouts`` delivery timeouts (nothing is opened when there are none)."""
    store = SubscriptionStore(home.notifications_dir)
    if not store.all():
        return []
    settings = load(NotificationSettings)
    _, con = snapshots.open_current(home.snapshots_dir)
    with con:
        return deliver_all(store, con, settings, budget_in_timeouts * settings.webhook_timeout_s)


def outcome_metadata(outcomes: list[Outcome]) -> dict[str, object]:
    """What the Dagster UI shows of a delivery pass: counts, and each subscription's state
    (names only: a subscriber's URL may carry a token)."""
    rows = [
        f"| {outcome.name} | {outcome.state} | {outcome.delivered} | {outcome.error or ''} |"
        for outcome in outcomes
    ]
    table = "\n".join(
        ["| subscription | state | delivered | last error |", "| --- | --- | --- | --- |", *rows]
    )
    return {
        "subscriptions": len(outcomes),
        "delivered": sum(outcome.delivered for outcome in outcomes),
        "failing": ", ".join(o.name for o in outcomes if o.state == "failing") or "none",
        "paused": ", ".join(o.name for o in outcomes if o.state == "paused") or "none",
        "states": dg.MetadataValue.md(table),
    }
