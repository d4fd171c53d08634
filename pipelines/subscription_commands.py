"""``ductwork subscriptions``: who is told of the mirror's changes, and replaying what they were
told."""

from __future__ import annotations

import sys
import time

from ductwork import snapshots
from ductwork.history import feed, feed_queries
from ductwork.notifications.delivery import head_seq, pending, tell_now
from ductwork.notifications.subscriptions import SubscriptionError, SubscriptionStore
from ductwork.settings import HomeSettings, NotificationSettings, load
from ductwork.streams.registry import STREAMS
from pipelines.usage import UsageError

REPLAY_LIMIT_S = 600.0  # a replay starts no delivery after this long


def _store() -> SubscriptionStore:
    return SubscriptionStore(load(HomeSettings).notifications_dir)


def add(name: str, url: str, streams: list[str]) -> int:
    """Store a subscription told of every publish from now on; its secret is the last line."""
    known = {stream.name for stream in STREAMS}
    unknown = sorted(set(streams) - known)
    if unknown:
        raise UsageError(f"unknown stream {unknown[0]!r}; streams: {', '.join(sorted(known))}")
    try:
        _, con = snapshots.open_current(load(HomeSettings).snapshots_dir)
    except FileNotFoundError:
        after = 0  # nothing published yet: the first publish is told too
    else:
        with con:
            after = head_seq(con)
    try:
        subscription = _store().add(name, url, streams, after)
    except SubscriptionError as exc:
        raise UsageError(str(exc)) from None
    print(
        f"Added subscription {name!r} to {', '.join(subscription.streams)}: told of every "
        "publish that changes them from now on. Its signing secret is shown once:"
    )
    print(subscription.secret)
    return 0


def show() -> int:
    """One line per subscription: name, URL, streams, cursor and state."""
    for sub in _store().all():
        cursor = f"publish {sub.cursor_seq}" + (
            f" {sub.cursor_stream}" if sub.cursor_stream else ""
        )
        print(f"{sub.name}\t{sub.url}\t{','.join(sub.streams)}\ttold up to {cursor}\t{sub.state()}")
    return 0


def remove(name: str) -> int:
    """Forget a subscription (its deliveries stop)."""
    try:
        _store().remove(name)
    except SubscriptionError as exc:
        raise UsageError(str(exc)) from None
    print(f"removed subscription {name!r}")
    return 0


def replay(name: str, since: str) -> int:
    """Tell the subscriber again of every publish after the token's, in order, now (a paused
    subscription resumes); exit 0 once it has acknowledged them all."""
    store = _store()
    try:
        subscription = store.get(name)
        _, con = snapshots.open_current(load(HomeSettings).snapshots_dir)
    except (SubscriptionError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    settings = load(NotificationSettings)
    with con:
        try:
            position = feed.decode_token(since, feed.mirror_id(con))
        except feed.InvalidToken as exc:
            raise UsageError(f"--since is not a token of this mirror ({exc})") from None
        if position.stream not in subscription.streams:
            raise UsageError(f"--since is a token of {position.stream!r}, not subscribed to")
        kept = feed_queries.publishes(con)
        start = position.since or 0
        if kept and start < kept[0].seq:
            print(f"changes before publish {kept[0].version} are no longer kept", file=sys.stderr)
        store.rewind(name, start)
        deadline = time.monotonic() + REPLAY_LIMIT_S
        delivered = 0
        while True:
            current = store.get(name)
            outcome = tell_now(store, current, pending(con, current), settings, deadline)
            delivered += outcome.delivered
            if outcome.state != "more" or time.monotonic() >= deadline:
                break
    print(f"replayed {delivered} notification(s) to {name!r}: {outcome.state}")
    if outcome.error:
        print(f"ductwork: the subscriber {outcome.error}", file=sys.stderr)
    return 0 if outcome.state == "told" else 1
