"""Telling subscribers what changed: one signed POST per publish and stream, in order.

A notification points into the changes feed and never carries records: its body is
``{"type": "ductwork.changes", "stream", "since", "next", "counts": {"upsert", "delete"}}``,
where ``since`` and ``next`` are feed tokens around the publish that made the changes (``since``
is null for a first publish: the whole stream). It is signed as the Standard Webhooks
specification says (the ``standardwebhooks`` package), and its ``webhook-id`` is the same at
every retry of it.

Deliveries to one subscriber happen one at a time, in (publish, stream) order, from whichever
process gets its lock first (a publishing run, the daemon's sensor, a replay); a subscriber
that fails stops its own deliveries until its back-off is over, never anyone else's.

One deadline (``DUCTWORK_WEBHOOK_TIMEOUT_S``) bounds each delivery whole, from connecting to
the last header, and a pass over every subscriber ends within the budget it is given: a
subscriber that trickles its answer a byte at a time holds up no pass longer than that.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb
from standardwebhooks.webhooks import Webhook

from ductwork.history import feed
from ductwork.notifications import event_loop
from ductwork.notifications.subscriptions import Subscription, SubscriptionStore
from ductwork.settings import NotificationSettings
from warehouse_sql import section

if TYPE_CHECKING:
    import httpx

BATCH = 100  # notifications read per subscription and pass
MAX_PARALLEL = 32  # subscribers told at once (connections open at once)
MIN_SHARE_OF_TIMEOUT = 0.5  # no delivery starts with less of a timeout left in the pass
EVENT_TYPE = "ductwork.changes"


@dataclass(frozen=True)
class Notification:
    """The changes one publish made to one stream, as a subscriber is told of them."""

    seq: int
    version: str
    stream: str
    upserts: int
    deletes: int
    since: str | None
    next: str

    def body(self) -> bytes:
        """The JSON body (keys in the contract's order, no records)."""
        message = {
            "type": EVENT_TYPE,
            "stream": self.stream,
            "since": self.since,
            "next": self.next,
            "counts": {"upsert": self.upserts, "delete": self.deletes},
        }
        return json.dumps(message, separators=(",", ":")).encode()

    def message_id(self, subscription: Subscription) -> str:
        """The ``webhook-id``: one per subscription, publish and stream, the same at retries."""
        return f"msg_{subscription.id}_{self.version}_{self.stream}"

    def after(self, seq: int, stream: str | None) -> bool:
        """Whether this notification comes after a cursor at (``seq``, ``stream``)."""
        if self.seq != seq:
            return self.seq > seq
        return stream is not None and self.stream > stream


@dataclass(frozen=True)
class Outcome:
    """What one pass did for one subscription: ``state`` is ``told`` (nothing left that was
    read), ``more`` (time ran out with notifications left), ``failing``, ``paused``, ``waiting``
    (back-off not over) or ``busy`` (another process is delivering to it)."""

    name: str
    delivered: int
    state: str
    error: str | None = None


def head_seq(con: duckdb.DuckDBPyConnection) -> int:
    """The newest publish a snapshot's history records (0 before any)."""
    rows = con.execute(section("history", "head")).fetchall()
    return int(rows[0][0]) if rows else 0


def pending(
    con: duckdb.DuckDBPyConnection, subscription: Subscription, limit: int = BATCH
) -> list[Notification]:
    """The notifications the subscription has still to be told, oldest first, from a
    snapshot's history.

    Publishes whose changes are no longer kept cannot be told. When the cursor is older than
    the oldest publish kept, the first notification of each stream says so: its ``since`` is
    the subscriber's own position, which the feed answers with 410 (history no longer kept), so
    the subscriber reloads instead of missing those changes; a subscriber told nothing yet gets
    ``since`` null (load everything), as at the first publish.
    """
    mirror = feed.mirror_id(con)
    first_kept = con.execute(section("history", "first_kept")).fetchall()[0][0]
    cursor = subscription.cursor_seq
    behind = first_kept is not None and cursor < first_kept
    rows = con.execute(
        section("history_feed", "notifications_after"),
        {
            "streams": list(subscription.streams),
            "seq": subscription.cursor_seq,
            "stream": subscription.cursor_stream,
            "limit": limit,
        },
    ).fetchall()
    found: list[Notification] = []
    gap_told: set[str] = set()
    for seq, version, stream, upserts, deletes in rows:
        if behind and stream not in gap_told:
            gap_told.add(stream)
            after = cursor
        else:
            after = seq - 1
        since = None if after <= 0 else feed.encode_token(feed.Position(stream, after), mirror)
        token = feed.encode_token(feed.Position(stream, seq), mirror)
        found.append(Notification(seq, version, stream, upserts, deletes, since, token))
    return found


async def post(
    subscription: Subscription,
    notification: Notification,
    transport: httpx.AsyncBaseTransport,
    timeout_s: float,
) -> str | None:
    """Send one notification; None when the subscriber answered 2xx within ``timeout_s``, else
    what went wrong (never the URL, which may carry a token).

    ``timeout_s`` bounds the whole exchange (connecting, sending, the status line, the headers):
    a subscriber that keeps the connection alive with a byte now and then is cut off all the
    same, its connection closed.
    """
    import httpx

    body = notification.body()
    stamp = datetime.now(UTC)
    signature = Webhook(subscription.secret).sign(
        notification.message_id(subscription), stamp, body.decode()
    )
    request = httpx.Request(
        "POST",
        subscription.url,
        content=body,
        headers={
            "content-type": "application/json",
            "user-agent": "ductwork-notifications",
            "webhook-id": notification.message_id(subscription),
            "webhook-timestamp": str(int(stamp.timestamp())),
            "webhook-signature": signature,
        },
        # httpx's own timeouts bound each read, not the exchange: the deadline below does.
        extensions={"timeout": httpx.Timeout(None).as_dict()},
    )
    try:
        async with asyncio.timeout(timeout_s):
            response = await transport.handle_async_request(request)
            # The answer's body is never read (a subscriber could send any amount).
            await response.aclose()
    except TimeoutError:
        return f"no answer within {timeout_s:.1f} s"
    except Exception as exc:  # its message may name the URL
        return f"not reached ({type(exc).__name__})"
    if not 200 <= response.status_code < 300:
        return f"answered {response.status_code}"
    return None


@contextmanager
def delivering(store: SubscriptionStore, subscription: Subscription) -> Iterator[bool]:
    """Hold the subscription's delivery lock if no other process does (yields whether it was
    taken); the lock goes with the process, so a killed deliverer never keeps it."""
    with open(store.private_file(f"{subscription.id}.lock"), "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


async def tell(
    store: SubscriptionStore,
    subscription: Subscription,
    notifications: list[Notification],
    settings: NotificationSettings,
    deadline: float,
    transport: httpx.AsyncBaseTransport,
    clock: Callable[[], float] = time.time,
) -> Outcome:
    """Deliver ``notifications`` to one subscriber in order, each once, while its lock is held:
    the cursor moves on each 2xx; the first failure records a back-off and stops. Nothing runs
    past ``deadline`` (``time.monotonic``), and no delivery starts with less than half a
    timeout before it."""
    with delivering(store, subscription) as taken:
        if not taken:
            return Outcome(subscription.name, 0, "busy")
        current = next((sub for sub in store.all() if sub.name == subscription.name), None)
        if current is None or current.id != subscription.id:
            return Outcome(subscription.name, 0, "told")  # removed or replaced meanwhile
        if not current.due(clock()):
            return Outcome(subscription.name, 0, "paused" if current.paused else "waiting")
        delivered = 0
        for notification in notifications:
            if not notification.after(current.cursor_seq, current.cursor_stream):
                continue
            # A delivery started this late would be cut short by the pass, not by the
            # subscriber: it is left for the next pass instead of counted as a failure.
            left = deadline - time.monotonic()
            if left < settings.webhook_timeout_s * MIN_SHARE_OF_TIMEOUT:
                return Outcome(subscription.name, delivered, "more")
            timeout = min(settings.webhook_timeout_s, left)
            problem = await post(current, notification, transport, timeout)
            if problem is not None:
                failed = store.failed(
                    current, problem, clock(), settings.webhook_backoff_s,
                    settings.webhook_give_up_s,
                )  # fmt: skip
                state = "paused" if failed.paused else "failing"
                return Outcome(subscription.name, delivered, state, problem)
            store.acknowledged(current, notification.seq, notification.stream)
            delivered += 1
        # A full batch may have more behind it: the next pass reads on.
        return Outcome(
            subscription.name, delivered, "more" if len(notifications) >= BATCH else "told"
        )


def tell_now(
    store: SubscriptionStore,
    subscription: Subscription,
    notifications: list[Notification],
    settings: NotificationSettings,
    deadline: float,
) -> Outcome:
    """``tell`` from synchronous code (a replay)."""

    async def main() -> Outcome:
        async with new_transport() as transport:
            return await tell(store, subscription, notifications, settings, deadline, transport)

    return event_loop.run(main())


def new_transport() -> httpx.AsyncHTTPTransport:
    """What deliveries are sent through: a transport, not a Client (a Client logs every
    request's URL). One serves a whole pass: its TLS settings are loaded once."""
    import httpx  # here, not above: every sync imports this module, few runs deliver

    return httpx.AsyncHTTPTransport()


@dataclass(frozen=True)
class Plan:
    """A delivery pass before it starts: what the snapshot's history has for each due
    subscription, and the outcomes of those not due (paused, or backing off)."""

    work: list[tuple[Subscription, list[Notification]]]
    not_due: list[Outcome]

    def has_news(self) -> bool:
        """Whether any due subscription has a notification to be told."""
        return any(notifications for _, notifications in self.work)


def plan(
    store: SubscriptionStore,
    con: duckdb.DuckDBPyConnection,
    clock: Callable[[], float] = time.time,
) -> Plan:
    """Read what every due subscription has still to be told from a snapshot's history."""
    now = clock()
    work = []
    not_due = []
    for subscription in store.all():
        if not subscription.due(now):
            state = "paused" if subscription.paused else "waiting"
            not_due.append(Outcome(subscription.name, 0, state, subscription.last_error))
            continue
        work.append((subscription, pending(con, subscription)))
    return Plan(work, not_due)


def deliver(
    store: SubscriptionStore,
    planned: Plan,
    settings: NotificationSettings,
    budget_s: float,
    clock: Callable[[], float] = time.time,
) -> list[Outcome]:
    """Carry out a plan, subscribers at once (``MAX_PARALLEL`` at a time), each in order; the
    pass ends within ``budget_s`` whatever the subscribers do (what is left stays for the next
    pass, counted against no one)."""
    deadline = time.monotonic() + budget_s
    outcomes = list(planned.not_due)
    # Told of everything already: no lock, no connection (most of the sensor's passes).
    outcomes.extend(Outcome(sub.name, 0, "told") for sub, notes in planned.work if not notes)
    work = [(sub, notes) for sub, notes in planned.work if notes]
    if work:
        outcomes.extend(event_loop.run(_tell_all(store, work, settings, deadline, clock)))
    return sorted(outcomes, key=lambda outcome: outcome.name)


async def _tell_all(
    store: SubscriptionStore,
    work: list[tuple[Subscription, list[Notification]]],
    settings: NotificationSettings,
    deadline: float,
    clock: Callable[[], float],
) -> list[Outcome]:
    turns = asyncio.Semaphore(MAX_PARALLEL)
    async with new_transport() as transport:

        async def one(subscription: Subscription, notifications: list[Notification]) -> Outcome:
            async with turns:
                return await tell(
                    store, subscription, notifications, settings, deadline, transport, clock
                )

        return list(await asyncio.gather(*(one(sub, notes) for sub, notes in work)))


def deliver_all(
    store: SubscriptionStore,
    con: duckdb.DuckDBPyConnection,
    settings: NotificationSettings,
    budget_s: float,
    clock: Callable[[], float] = time.time,
) -> list[Outcome]:
    """One pass over every subscription that is due: what the snapshot's history has for it,
    delivered in order, subscribers at once, all within ``budget_s``."""
    return deliver(store, plan(store, con, clock), settings, budget_s, clock)


def summary(outcomes: list[Outcome]) -> str:
    """One line for a log or a sensor tick: deliveries made, subscribers failing or paused."""
    delivered = sum(outcome.delivered for outcome in outcomes)
    text = f"{delivered} notification(s) delivered to {len(outcomes)} subscription(s)"
    for state in ("failing", "paused", "waiting", "busy", "more"):
        names = [outcome.name for outcome in outcomes if outcome.state == state]
        if names:
            text += f"; {state}: {', '.join(names)}"
    return text
