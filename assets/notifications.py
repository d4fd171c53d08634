"""Change notifications, delivered by the run that published: the step after the publish."""

# No ``from __future__ import annotations``: Dagster reads the ``context`` annotation as an object.
from pathlib import Path

import dagster as dg

from assets.ingest import OWNERS
from assets.publish import serving_snapshot
from assets.resources import DataHome
from ductwork import snapshots
from ductwork.notifications.delivery import Outcome, deliver_all, summary
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
        "cursor moved on a 2xx only. What a failing subscriber missed is retried by the sensor "
        "retry_change_notifications; a subscriber failing for DUCTWORK_WEBHOOK_GIVE_UP_S is "
        "paused, as this step's metadata shows."
    ),
)
def change_notifications(
    context: dg.AssetExecutionContext, data_home: DataHome
) -> dg.MaterializeResult:
    """Deliver what the newly published snapshot's history has for each subscription."""
    outcomes = deliver_pending(HomeSettings(home=Path(data_home.path)), RUN_BUDGET_IN_TIMEOUTS)
    context.log.info(summary(outcomes))
    return dg.MaterializeResult(metadata=outcome_metadata(outcomes))


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
