"""The per-process moving windows of the rate limits (serve/rate_limit.py, ``LocalWindows``),
what a request weighs and whom it is counted for."""

from __future__ import annotations

from limits import RateLimitItemPerSecond

from ductwork.contract import paths
from serve.deps import request_cost
from serve.rate_limit import LocalWindows, client_of, page_cost


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_window_admits_its_amount_then_refuses_until_the_oldest_leaves_it() -> None:
    clock = Clock()
    windows = LocalWindows(clock)
    three = RateLimitItemPerSecond(3)
    for step in range(3):
        clock.now = 1000.0 + step * 0.25
        assert windows.hit(three, ("key", "a")) is None
    clock.now = 1000.9
    assert windows.hit(three, ("key", "a")) == 1  # Retry-After: at least a second
    assert windows.hit(three, ("key", "b")) is None  # another client has its own window
    assert windows.hit(three, ("other", "a")) is None  # and so has another limit
    clock.now = 1001.0  # the first request is still inside the window at its very edge
    assert windows.hit(three, ("key", "a")) == 1
    clock.now = 1001.01
    assert windows.hit(three, ("key", "a")) is None  # the first one has left it
    assert windows.hit(three, ("key", "a")) == 1


def test_a_refused_request_is_not_counted() -> None:
    clock = Clock()
    windows = LocalWindows(clock)
    one = RateLimitItemPerSecond(1)
    assert windows.hit(one, ("key", "a")) is None
    for _ in range(100):
        clock.now += 0.001
        assert windows.hit(one, ("key", "a")) == 1
    clock.now = 1001.5
    assert windows.hit(one, ("key", "a")) is None


def test_clients_idle_for_a_window_are_forgotten() -> None:
    clock = Clock()
    windows = LocalWindows(clock)
    five = RateLimitItemPerSecond(5)
    for client in range(50):
        windows.hit(five, ("address", str(client)))
    assert len(windows) == 50
    clock.now += 2.5
    windows.hit(five, ("address", "new"))
    assert len(windows) == 1


def test_a_request_weighs_its_cost_and_waits_for_enough_of_the_window_to_leave() -> None:
    clock = Clock()
    windows = LocalWindows(clock)
    ten = RateLimitItemPerSecond(10)
    assert windows.hit(ten, ("key", "a"), 4) is None
    clock.now += 0.5
    assert windows.hit(ten, ("key", "a"), 4) is None
    assert windows.hit(ten, ("key", "a"), 4) == 1  # 8 of 10 used: 4 more do not fit
    assert windows.hit(ten, ("key", "a"), 2) is None  # 2 still do
    clock.now += 0.6  # the first 4 have left the window
    assert windows.hit(ten, ("key", "a"), 4) is None
    assert windows.hit(ten, ("key", "a")) == 1


def test_a_pages_cost_is_a_unit_per_hundred_records_asked_for() -> None:
    assert [page_cost(n) for n in (1, 100, 101, 1000)] == [1, 1, 2, 10]
    assert request_cost(paths.LEADS, {"count": "1000"}) == 10
    assert request_cost(paths.unit_path("accessories"), {}) == 1  # the default page: 100
    assert request_cost(paths.LEADS, {"count": "abc"}) == 1  # answered 400 without a record read
    assert request_cost(f"{paths.LEADS}/00Q1", {"count": "1000"}) == 1  # a lookup reads no page


def test_a_feed_pages_cost_is_a_unit_per_hundred_entries_asked_for() -> None:
    feed = "/_ductwork/v1/changes/leads"
    assert request_cost(feed, {"limit": "10000"}) == 100  # as a hundred lead pages of 100
    assert request_cost(feed, {}) == 10  # the default page: 1000 entries
    assert request_cost(feed, {"limit": "50", "count": "1000"}) == 1  # the feed reads no count
    assert request_cost(feed, {"limit": "10001"}) == 1  # answered 400 without an entry read


def test_ipv6_clients_are_counted_by_their_slash_64() -> None:
    same = {client_of(a) for a in ("2001:db8:1:2::a", "2001:db8:1:2:ffff::1", "2001:DB8:1:2::b")}
    assert same == {"2001:db8:1:2::/64"}
    assert client_of("2001:db8:1:3::a") != client_of("2001:db8:1:2::a")
    assert client_of("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_of("192.0.2.7") == "192.0.2.7"
    assert client_of("fe80::1%eth0") == "fe80::/64"
    assert client_of("unknown") == "unknown"
