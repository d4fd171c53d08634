"""Downloading product images whose URLs come from upstream records, without trusting them.

An image URL is whatever the upstream's records say, so the download is guarded:

- only from the allowed hosts (``DUCTWORK_IMAGE_HOSTS``; by default the upstream's own host);
- never to a loopback, link-local, private or otherwise non-public address, checked on the
  addresses the connection is actually made to (the connector's resolver drops them, so a
  name cannot resolve to a public address for a check and a private one for the connection),
  unless the host is explicitly listed;
- redirects only within the same host, and at most ``MAX_REDIRECTS`` of them;
- only ``image/*`` content (SVG excepted: it can carry scripts), at most ``max_bytes`` long,
  counted as the body arrives, so an endless body is cut off.

The rules themselves (hosts, addresses, size) are ``ductwork.upstream.image_policy``'s; this
module applies them to the connections it makes.
"""

from __future__ import annotations

import asyncio
import random
import socket
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from ductwork.upstream.image_policy import (
    ImagePolicy,
    ImageRefused,
    is_public_address,
    normal_host,
)

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
REFUSED_TYPES = frozenset({"image/svg+xml"})
CHUNK_BYTES = 64 * 1024


class ImageFetchError(Exception):
    """The image could not be downloaded (an error status, or retries ran out)."""


class _Transient(Exception):
    """A failure worth another attempt (a 5xx)."""


class _PublicOnlyResolver(AbstractResolver):
    """Resolves names, then keeps only the addresses the policy lets this host reach: the
    connector connects to exactly what this returns."""

    def __init__(self, policy: ImagePolicy) -> None:
        self._policy = policy
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if self._policy.allows_private(host, port):
            return found
        kept = [entry for entry in found if is_public_address(entry["host"])]
        if not kept:
            raise ImageRefused(f"host {host} resolves only to addresses that are not public")
        return kept

    async def close(self) -> None:
        await self._inner.close()


@dataclass(frozen=True)
class Image:
    """A downloaded image: its bytes and its (checked) content type."""

    body: bytes
    content_type: str


class ImageFetcher:
    """Guarded image downloads on one aiohttp session: open it with ``async with``."""

    def __init__(
        self,
        policy: ImagePolicy,
        *,
        concurrency: int = 8,
        timeout_s: float = 30.0,
        retries: int = 2,
        seed: int | None = None,
    ) -> None:
        self._policy = policy
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._retries = retries
        self._random = random.Random(seed)
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ImageFetcher:
        connector = aiohttp.TCPConnector(
            limit=self._concurrency, resolver=_PublicOnlyResolver(self._policy)
        )
        # No Authorization header: image hosts never get the upstream's key.
        self._http = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            headers={"Accept": "image/*"},
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def fetch(self, url: str) -> Image:
        """Download one image under the policy.

        Raises ImageRefused when the policy forbids it, ImageFetchError on an error status or
        when retries of 5xx answers and lost connections run out.
        """
        target = self._policy.check_url(url)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._follow(target)
            except (_Transient, aiohttp.ClientError, TimeoutError) as exc:
                reason = str(exc) if isinstance(exc, _Transient) else type(exc).__name__
                if attempts > self._retries:
                    raise ImageFetchError(f"{reason}; gave up after {attempts} attempts") from None
            await asyncio.sleep(self._random.uniform(0, 0.2 * 2 ** (attempts - 1)))

    async def _follow(self, target: URL) -> Image:
        """One attempt: the request and any redirects within the same host."""
        if self._http is None:
            raise RuntimeError("ImageFetcher used outside 'async with'")
        for _ in range(MAX_REDIRECTS + 1):
            async with self._http.get(target, allow_redirects=False) as response:
                if response.status in REDIRECT_STATUSES:
                    target = self._redirect(target, response.headers.get("Location"))
                    continue
                if response.status in RETRYABLE_STATUSES:
                    raise _Transient(f"HTTP {response.status}")
                if response.status != 200:
                    raise ImageFetchError(f"HTTP {response.status}")
                return await self._body(response)
        raise ImageRefused(f"more than {MAX_REDIRECTS} redirects")

    def _redirect(self, current: URL, location: str | None) -> URL:
        """The redirect's target, if it stays on the same host and within the policy."""
        if not location:
            raise ImageRefused("a redirect without a Location")
        try:
            following = current.join(URL(location))
        except ValueError:
            raise ImageRefused("a redirect to an unusable URL") from None
        if normal_host(following.host or "") != normal_host(current.host or ""):
            raise ImageRefused(f"redirect to another host ({following.host}) refused")
        return self._policy.check_url(following)

    async def _body(self, response: aiohttp.ClientResponse) -> Image:
        """The body, if it is an image no larger than the cap."""
        content_type = response.content_type.lower()
        if not content_type.startswith("image/") or content_type in REFUSED_TYPES:
            raise ImageRefused(f"content type {content_type!r} is not an accepted image type")
        cap = self._policy.max_bytes
        if response.content_length is not None and response.content_length > cap:
            raise ImageRefused(f"{response.content_length} bytes is over the {cap}-byte cap")
        chunks, size = [], 0
        async for chunk in response.content.iter_chunked(CHUNK_BYTES):
            size += len(chunk)
            if size > cap:
                raise ImageRefused(f"body over the {cap}-byte cap")
            chunks.append(chunk)
        return Image(b"".join(chunks), content_type)
