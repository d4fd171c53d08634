"""Which image URLs may be downloaded (the allowed hosts, public addresses only, a size cap),
and the object key a downloaded image is stored under (``image_key``).

The policy needs no HTTP client, so the sync, which only hands it to the image job, does not
import one; the download itself is ``ductwork.upstream.image_fetch``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from yarl import URL

IMAGE_PREFIX = "images/"
_EXTENSION = re.compile(r"\.[a-z0-9]{1,10}")
# NAT64 addresses embed an IPv4 address, which is what they reach.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class ImageRefused(Exception):
    """The image breaks the download policy; retrying cannot help."""


def is_public_address(address: str) -> bool:
    """Whether an IP address is globally routable (not loopback, link-local, private, ...)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not part of it
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class HostRule:
    """One allowed host: any port, or only ``port``."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int | None) -> bool:
        """Whether ``host:port`` is this rule's."""
        return host == self.host and (self.port is None or port == self.port)


def normal_host(host: str) -> str:
    """A host name as rules compare it: lower case, without a trailing dot."""
    return host.lower().rstrip(".")


def parse_hosts(text: str) -> tuple[HostRule, ...]:
    """``host`` or ``host:port`` entries, comma-separated (IPv6 in brackets); ValueError for
    an entry that is not one."""
    rules = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            parts = urlsplit(f"//{entry}")
            port = parts.port
        except ValueError:
            raise ValueError(f"image host {entry!r} is not host or host:port") from None
        if not parts.hostname or parts.netloc != entry or parts.username is not None:
            raise ValueError(f"image host {entry!r} is not host or host:port")
        rules.append(HostRule(normal_host(parts.hostname), port))
    return tuple(rules)


@dataclass(frozen=True)
class ImagePolicy:
    """Where images may come from and how large they may be."""

    hosts: tuple[HostRule, ...]
    listed: bool  # the hosts were listed by the operator: they may be private addresses
    max_bytes: int

    @classmethod
    def for_upstream(
        cls, upstream_url: str, image_hosts: str | None, max_bytes: int
    ) -> ImagePolicy:
        """The listed hosts, or else the upstream's own host (which must then be public)."""
        if image_hosts is not None and image_hosts.strip():
            return cls(parse_hosts(image_hosts), listed=True, max_bytes=max_bytes)
        host = URL(upstream_url).host
        hosts = (HostRule(normal_host(host)),) if host else ()
        return cls(hosts, listed=False, max_bytes=max_bytes)

    def allows_host(self, host: str, port: int | None) -> bool:
        """Whether ``host:port`` is an allowed image host."""
        return any(rule.matches(normal_host(host), port) for rule in self.hosts)

    def allows_private(self, host: str, port: int | None) -> bool:
        """Whether ``host:port`` may resolve to a non-public address: only if listed."""
        return self.listed and self.allows_host(host, port)

    def check_url(self, url: str | URL) -> URL:
        """The URL to request; ImageRefused when the policy forbids it before any connection."""
        try:
            target = url if isinstance(url, URL) else URL(url, encoded=True)
            host, port = target.host, target.port
        except ValueError as exc:
            raise ImageRefused(f"not a usable URL: {exc}") from None
        if target.scheme not in ("http", "https") or not host:
            raise ImageRefused("only absolute http and https URLs are downloaded")
        if target.user is not None or target.password is not None:
            raise ImageRefused("URLs with credentials are refused")
        if not self.allows_host(host, port):
            raise ImageRefused(f"host {host}:{port} is not an allowed image host")
        if _is_ip(host) and not self.allows_private(host, port) and not is_public_address(host):
            raise ImageRefused(f"address {host} is not public")
        return target


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def image_key(sku: str, url: str) -> str:
    """``images/<percent-encoded SKU>/<sha256 of the URL><extension of the URL's file name>``.

    Nothing of the URL but a short alphanumeric extension reaches the key, so no URL can
    climb out of its SKU's folder or land on another image's key.
    """
    folder = quote(sku, safe="")
    if folder.strip(".") == "":  # "", "." or "..": not a usable path segment
        folder = "".join("%2E" for _ in folder) or "%00"
    try:
        path = urlsplit(url).path
    except ValueError:  # unparsable (the fetch refuses it): its row still needs a key
        path = ""
    name = unquote(path.rsplit("/", 1)[-1])
    extension = posixpath.splitext(name)[1].lower()
    if not _EXTENSION.fullmatch(extension):
        extension = ""
    return f"{IMAGE_PREFIX}{folder}/{hashlib.sha256(url.encode()).hexdigest()}{extension}"
