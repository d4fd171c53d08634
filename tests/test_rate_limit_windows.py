"""The per-process moving windows of the rate limits (serve/rate_limit.py, ``LocalWindows``)."""

from __future__ import annotations

from limits import RateLimitItemPerSecond

from serve.rate_limit import LocalWindows


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
