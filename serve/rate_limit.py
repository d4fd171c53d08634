"""Per-client request limits over a moving one-second window, through the ``limits`` library.

With ``DUCTWORK_RATE_LIMIT_URL`` (``redis://...``) every worker of every replica counts in the
same Redis, so a limit holds for the whole service. Without it, each process counts in its
own memory, and the service admits the limit times the number of processes. In memory the
windows are kept here (``LocalWindows``) rather than in the library's memory storage, whose
clean-up hops to a thread and holds the client's lock meanwhile, on nearly every request.

When Redis cannot be reached the limits fail open to this process's own memory: requests are
still counted and limited per process, a warning is logged (at most once a minute) and
``ductwork_rate_limit_store_errors_total`` counts each check made without Redis. Redis is not
tried again for a few seconds after a failure, so an unreachable server does not add its
timeout to every request.

A request may weigh more than one: a page of records costs a unit per hundred records it may
hold (``page_cost``). Clients are counted by address, an IPv6 client by its /64
(``client_of``): one host usually holds a whole /64 and could otherwise use a new address for
every request.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from functools import lru_cache

from limits import RateLimitItemPerSecond
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError
from limits.storage import storage_from_string
from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger("ductwork.serve")

# Redis answers in well under a millisecond on a local network; a slower answer is a fault.
REDIS_TIMEOUT_S = 0.5
RETRY_REDIS_AFTER_S = 5.0
WARN_EVERY_S = 60.0
RECORDS_PER_UNIT = 100  # a page of up to this many records costs one unit of a key's limit
IPV6_CLIENT_PREFIX = 64


def page_cost(records: int) -> int:
    """The units a page of (at most) ``records`` records costs: one per hundred, at least one."""
    return max(1, -(-records // RECORDS_PER_UNIT))


@lru_cache(maxsize=4096)
def client_of(address: str) -> str:
    """Whom a peer address is counted as: an IPv4 address (IPv4-mapped IPv6 included) as
    itself, any other IPv6 address by its /64; a text that is no address as it is."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{parsed}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(parsed)


class LimitCounter:
    """Where limits are counted: Redis when given a URL, with this process's memory standing
    in while Redis fails; memory alone otherwise."""

    def __init__(self, redis_url: str | None, registry: CollectorRegistry | None) -> None:
        """``registry`` takes the error counter; None in prometheus multiprocess mode."""
        self._local = LocalWindows()
        self._remote: MovingWindowRateLimiter | None = None
        if redis_url is not None:
            storage: Storage = storage_from_string(
                f"async+{redis_url}",
                implementation="redispy",
                wrap_exceptions=True,
                socket_timeout=REDIS_TIMEOUT_S,
                socket_connect_timeout=REDIS_TIMEOUT_S,
            )
            self._remote = MovingWindowRateLimiter(storage)
        self._skip_remote_until = 0.0
        self._warned_at = -math.inf
        self.store_errors = Counter(
            "ductwork_rate_limit_store_errors",
            "Rate-limit checks counted in process memory because Redis failed",
            registry=registry,
        )

    @property
    def in_memory(self) -> bool:
        """Counted in this process's memory alone: no Redis is configured."""
        return self._remote is None

    def hit_in_memory(
        self, limit: RateLimitItemPerSecond, who: tuple[str, ...], cost: int = 1
    ) -> int | None:
        """``hit`` for a counter without Redis (``in_memory``), which needs no await."""
        return self._local.hit(limit, who, cost)

    async def hit(
        self, limit: RateLimitItemPerSecond, who: tuple[str, ...], cost: int = 1
    ) -> int | None:
        """Count a request of ``cost`` units for ``who``: None if allowed, else the seconds
        to wait."""
        remote = self._remote
        if remote is None:
            return self._local.hit(limit, who, cost)
        if time.monotonic() >= self._skip_remote_until:
            try:
                return await _hit(remote, limit, who, cost)
            except (StorageError, OSError) as exc:
                self._remote_failed(exc)
        self.store_errors.inc()
        return self._local.hit(limit, who, cost)

    def _remote_failed(self, exc: Exception) -> None:
        now = time.monotonic()
        self._skip_remote_until = now + RETRY_REDIS_AFTER_S
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            # The error's type only: its text may carry the server's address and credentials.
            log.warning(
                "rate limits counted per process: the Redis store failed (%s)",
                type(getattr(exc, "storage_error", exc)).__name__,
            )


async def _hit(
    limiter: MovingWindowRateLimiter,
    limit: RateLimitItemPerSecond,
    who: tuple[str, ...],
    cost: int,
) -> int | None:
    if await limiter.hit(limit, *who, cost=cost):
        return None
    stats = await limiter.get_window_stats(limit, *who)
    return max(1, math.ceil(stats.reset_time - time.time()))


class LocalWindows:
    """Moving windows counted in this process's memory: the times of each client's requests
    still inside its window, oldest first. A request is refused when the window already holds
    ``amount`` of them, as the library's moving window does."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[tuple[str, ...], deque[float]] = {}
        self._next_sweep = -math.inf

    def __len__(self) -> int:
        """The clients with a window held."""
        return len(self._hits)

    def hit(self, limit: RateLimitItemPerSecond, who: tuple[str, ...], cost: int = 1) -> int | None:
        """Count a request of ``cost`` units for ``who`` (each unit a hit in the window):
        None if allowed, else the seconds to wait."""
        now = self._clock()
        period = limit.get_expiry()
        if now >= self._next_sweep:
            self._sweep(now, period)
        hits = self._hits.get(who)
        if hits is None:
            hits = self._hits[who] = deque()
        while hits and hits[0] < now - period:
            hits.popleft()
        if len(hits) + cost > limit.amount:
            # Refused until enough of the oldest units have left the window.
            leaving = hits[min(len(hits) - 1, len(hits) + cost - limit.amount - 1)]
            return max(1, math.ceil(leaving + period - now))
        hits.extend([now] * cost)
        return None

    def _sweep(self, now: float, period: float) -> None:
        """Forget clients with no request inside the window (at most once a window)."""
        self._next_sweep = now + period
        for who in [who for who, hits in self._hits.items() if not hits or hits[-1] < now - period]:
            del self._hits[who]


class RequestLimit:
    """At most ``per_second`` requests per client in any one-second window, counted under
    ``name`` so that separate limits never share a count."""

    def __init__(self, counter: LimitCounter, name: str, per_second: int) -> None:
        self._counter = counter
        self._name = name
        self._limit = RateLimitItemPerSecond(per_second)

    @property
    def in_memory(self) -> bool:
        """Counted in this process's memory alone (no Redis): ``check_now`` may count."""
        return self._counter.in_memory

    def check_now(self, client: str, cost: int = 1) -> int | None:
        """``check`` for a limit counted ``in_memory``, which needs no await."""
        cost = min(cost, self._limit.amount)
        return self._counter.hit_in_memory(self._limit, (self._name, client), cost)

    async def check(self, client: str, cost: int = 1) -> int | None:
        """Count a request of ``cost`` units (at most the whole limit, so that every request
        can pass in an idle window): None if allowed, else the seconds to wait (for
        ``Retry-After``)."""
        if self._counter.in_memory:  # nothing to wait for: spare the counter's coroutine
            return self.check_now(client, cost)
        cost = min(cost, self._limit.amount)
        return await self._counter.hit(self._limit, (self._name, client), cost)
