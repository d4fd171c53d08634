"""The one HTTP client to the upstream service.

A full sync is about a hundred thousand small requests, so the client's own cost per request
decides its speed: it sends them over ``http_pool``'s keep-alive connections (httptools parses
the answers), which cost far less CPU per request than aiohttp, the client before it (bench/
measures the sync against an aiohttp floor and a bare one).

Pooled keep-alive connections, Bearer auth, a bound on requests in flight, retries with
exponential backoff and full jitter on 5xx, dropped connections and bodies that should be JSON
but are not (cut short, or an HTML error page sent with status 200), ``Retry-After`` honoured
on 429 (never a shorter wait), and an immediate, clear failure on 401. The API key is sent in
a header and never appears in a message, a log line or metadata.

Nothing an upstream sends can hold it without end: every request has a total timeout, every body
is counted as it arrives, after decompression, and refused past a cap (a few megabytes of gzip
can inflate to gigabytes), every head is refused past caps on its bytes and its fields, and a
page-number list is walked under the rules of ``list_pages`` (no page repeated, no total that
contradicts the pages). Such refusals raise ``UpstreamContractError`` and are never retried.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict, astuple, dataclass
from typing import Any

from ductwork.contract.encoding import loads
from ductwork.settings import UpstreamTuning
from ductwork.stop_signals import stopping
from ductwork.upstream.errors import UpstreamAuthError, UpstreamContractError, UpstreamError
from ductwork.upstream.http_pool import (
    BodyTooLarge,
    ConnectionLost,
    ConnectionPool,
    HeadTooLarge,
    Origin,
    header_lines,
    request_target,
)
from ductwork.upstream.list_pages import PageRules, pagination_of

log = logging.getLogger("ductwork.upstream")

RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
# Records per page when reading a page-number list whole (the most the upstream serves).
LIST_PAGE_SIZE = 1000
# The largest body accepted, after decompression (DUCTWORK_UPSTREAM_MAX_BODY_BYTES).
MAX_BODY_BYTES: int = UpstreamTuning.model_fields["upstream_max_body_bytes"].default
Params = Mapping[str, str | int]


@dataclass
class RequestStats:
    """What a sync cost the upstream; reported as Dagster metadata."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    dropped_connections: int = 0
    malformed_bodies: int = 0
    bytes_received: int = 0

    def as_metadata(self) -> dict[str, int]:
        """Numeric metadata, so the UI can plot it over runs."""
        return asdict(self)

    def __add__(self, other: RequestStats) -> RequestStats:
        return RequestStats(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class Answer:
    """A final (non-retried) upstream answer."""

    status: int
    body: bytes
    document: Any = None  # the parsed body, when the request asked for JSON

    def json(self) -> Any:
        """The body parsed as JSON."""
        return self.document if self.document is not None else loads(self.body)


@dataclass
class _Tally:
    """Failures and rate-limit waits of one logical request."""

    failures: int = 0
    rate_waits: int = 0


@dataclass(frozen=True)
class RetryRules:
    """How persistent the client is; the defaults suit a scheduled sync."""

    max_retries: int = 6
    max_rate_limit_waits: int = 50
    backoff_base_s: float = 0.2
    backoff_cap_s: float = 20.0
    max_retry_after_s: float = 600.0


class UpstreamClient:
    """Async client for one sync: open it with ``async with``, share it across coroutines."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        concurrency: int = 8,
        timeout_s: float = 30.0,
        rules: RetryRules | None = None,
        seed: int | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._origin, self._base_path = Origin.split(base_url.rstrip("/"))
        # Built once: a full sync sends about a hundred thousand requests with it.
        self._auth_lines = header_lines({"Authorization": f"Bearer {api_key}"})
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._max_body_bytes = max_body_bytes
        self._rules = rules or RetryRules()
        self._random = random.Random(seed)
        self._in_flight = asyncio.Semaphore(concurrency)
        self._http: ConnectionPool | None = None
        self.stats = RequestStats()

    def counted_apart(self) -> UpstreamClient:
        """This client with request statistics of its own: it shares the connections and the
        limit on requests in flight, so several reads can each report their own cost. Use it
        inside this client's ``async with``; never enter or leave it itself."""
        view = copy.copy(self)
        view.stats = RequestStats()
        return view

    @property
    def concurrency(self) -> int:
        """The most requests this client keeps in flight."""
        return self._concurrency

    async def __aenter__(self) -> UpstreamClient:
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate",
            "User-Agent": "ductwork",
        }
        self._http = ConnectionPool(headers, self._max_body_bytes, self._timeout_s)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    async def get(
        self,
        path: str,
        params: Params | None = None,
        *,
        accept: frozenset[int] = frozenset({200}),
        auth: bool = True,
        parse_json: bool = False,
    ) -> Answer:
        """GET ``path`` (already percent-encoded; or an absolute URL), retrying transient failures.

        Returns the answer when its status is in ``accept``; raises UpstreamAuthError on 401,
        UpstreamContractError on a body larger than the cap (after decompression) or a head
        over the caps of ``http_pool``, and UpstreamError on any other status or when retries
        run out. With ``parse_json`` an accepted answer whose body is not JSON is retried like a
        dropped connection: a body cut short or a proxy's HTML page must never be stored.
        """
        if self._http is None:
            raise RuntimeError("UpstreamClient used outside 'async with'")
        headers = self._auth_lines if auth else ""
        origin, target = self._origin_and_target(path, params)
        tally = _Tally()
        while True:
            if stopping():
                # The run's own interrupt for that signal can be lost (raised inside a weakref
                # callback or a destructor, Python only prints it): stop here instead.
                raise KeyboardInterrupt
            async with self._in_flight:
                self.stats.requests += 1
                try:
                    raw = await self._http.get(origin, target, headers)
                    status, body, retry_after = raw.status, raw.body, raw.retry_after
                except BodyTooLarge:
                    raise UpstreamContractError(
                        f"GET {path}: refused, the body is larger than {self._max_body_bytes:,} "
                        "bytes after decompression (DUCTWORK_UPSTREAM_MAX_BODY_BYTES)"
                    ) from None
                except HeadTooLarge as exc:
                    raise UpstreamContractError(f"GET {path}: refused, {exc}") from None
                except (ConnectionLost, OSError, TimeoutError) as exc:
                    self.stats.dropped_connections += 1
                    reason = f"connection lost ({type(exc).__name__})"
                    delay = self._after_failure(tally, path, reason)
                else:
                    self.stats.bytes_received += len(body)
                    if status in accept:
                        answer = _accepted(status, body, parse_json)
                        if answer is not None:
                            return answer
                        self.stats.malformed_bodies += 1
                        reason = f"HTTP {status} with a body that is not JSON"
                        delay = self._after_failure(tally, path, reason)
                    else:
                        delay = self._after_status(tally, path, status, retry_after, body)
            self.stats.retries += 1
            await asyncio.sleep(delay)

    def _origin_and_target(self, path: str, params: Params | None) -> tuple[Origin, str]:
        """Where a GET of ``path`` (an absolute URL, or a path under the base URL) with the
        query ``params`` goes: the origin, and the request target."""
        query = {name: str(value) for name, value in params.items()} if params else None
        if path.startswith(("http://", "https://")):
            origin, own_path = Origin.split(path)
            return origin, request_target(own_path, query)
        return self._origin, request_target(self._base_path + path, query)

    def _after_status(
        self, tally: _Tally, path: str, status: int, retry_after: str | None, body: bytes
    ) -> float:
        """Decide what an unaccepted status means: a wait before retrying, or an error."""
        if status == 401:
            raise UpstreamAuthError(
                f"upstream rejected the API key (401) on GET {path}: "
                "check DUCTWORK_UPSTREAM_API_KEY"
            )
        if status == 429:
            self.stats.rate_limited += 1
            tally.rate_waits += 1
            if tally.rate_waits > self._rules.max_rate_limit_waits:
                waits = tally.rate_waits
                raise UpstreamError(f"GET {path}: still rate limited after {waits} waits")
            delay = self._retry_after(retry_after, path)
            log.debug("GET %s: rate limited (HTTP 429); waiting %.2f s (Retry-After)", path, delay)
            return delay
        if status in RETRYABLE_STATUSES:
            self.stats.server_errors += 1
            return self._after_failure(tally, path, f"HTTP {status}")
        raise UpstreamError(f"GET {path}: unexpected HTTP {status}: {body[:200]!r}")

    def _after_failure(self, tally: _Tally, path: str, reason: str) -> float:
        """Back off after a 5xx or a lost connection, or give up when retries are spent."""
        tally.failures += 1
        if tally.failures > self._rules.max_retries:
            raise UpstreamError(f"GET {path}: {reason}; gave up after {tally.failures} attempts")
        ceiling = self._rules.backoff_base_s * 2 ** (tally.failures - 1)
        delay = self._random.uniform(0, min(self._rules.backoff_cap_s, ceiling))
        log.debug("GET %s: %s; retry %d in %.2f s", path, reason, tally.failures, delay)
        return delay

    async def get_json(self, path: str, params: Params | None = None, *, auth: bool = True) -> Any:
        """GET a 200 JSON body."""
        return (await self.get(path, params, auth=auth, parse_json=True)).document

    async def iter_pages(
        self,
        path: str,
        params: Params | None = None,
        *,
        count: int = LIST_PAGE_SIZE,
        first_page: int = 1,
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield every page body of a page-number list from ``first_page`` on, in page order.

        The first page is read alone for ``totalPages``; the rest are fetched concurrently, at
        most a window of pages ahead of the consumer so memory stays bounded.
        """
        answers = self.iter_page_answers(path, params, count=count, first_page=first_page)
        async for answer in answers:
            yield answer.document

    async def iter_page_answers(
        self,
        path: str,
        params: Params | None = None,
        *,
        count: int = LIST_PAGE_SIZE,
        first_page: int = 1,
    ) -> AsyncIterator[Answer]:
        """``iter_pages``, yielding each page's answer: its raw body and its parsed body.

        Every page is checked against the rules of ``list_pages.PageRules`` before it is
        yielded, so a page the walk must refuse never reaches the consumer.
        """
        base = dict(params or {})
        rules = PageRules(path, count)
        first = await self.get(path, {**base, "count": count, "page": first_page}, parse_json=True)
        rules.check(first_page, first.document)
        yield first
        # An integer that agrees with totalItems: the rules checked the first page.
        pages = pagination_of(first.document)["totalPages"]
        window = max(2, 2 * self._concurrency)
        pending: dict[int, asyncio.Task[Answer]] = {}
        next_page = first_page + 1
        try:
            for page in range(first_page + 1, pages + 1):
                while next_page <= pages and next_page < page + window:
                    params_n = {**base, "count": count, "page": next_page}
                    pending[next_page] = asyncio.ensure_future(
                        self.get(path, params_n, parse_json=True)
                    )
                    next_page += 1
                answer = await pending.pop(page)
                rules.check(page, answer.document)
                yield answer
        finally:
            for task in pending.values():
                task.cancel()

    def _retry_after(self, raw: str | None, path: str) -> float:
        try:
            wait = max(0.0, float(raw or "1"))
        except ValueError:
            wait = 1.0
        if wait > self._rules.max_retry_after_s:
            raise UpstreamError(f"GET {path}: upstream asked to wait {wait:.0f}s (Retry-After)")
        # Never shorter than asked; a little jitter spreads concurrent waiters apart.
        return wait + self._random.uniform(0, min(1.0, 0.1 + wait * 0.1))


def _accepted(status: int, body: bytes, parse_json: bool) -> Answer | None:
    """The answer to return, or None when a JSON body was asked for and this is not one."""
    if not parse_json:
        return Answer(status, body)
    try:
        return Answer(status, body, loads(body))
    except ValueError:  # orjson's JSONDecodeError
        return None
