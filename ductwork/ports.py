"""Whether a TCP port is free to serve on, checked the way the servers bind it.

The servers bind with ``SO_REUSEADDR``, so a closed connection still in TIME_WAIT does not
hold a port; a listener (or any other socket bound without it) does.
"""

from __future__ import annotations

import errno
import socket


class PortTaken(OSError):
    """Something already holds the address a server was asked to serve on."""


def reusable_socket(host: str) -> socket.socket:
    """An unbound TCP socket for ``host`` (IPv6 when it has a colon) with ``SO_REUSEADDR``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def bindable_port(host: str, port: int) -> int:
    """The port a server may bind on ``host`` (``port`` itself, or a free one the kernel picks
    for 0), found by binding it and letting it go at once. ``PortTaken`` when something holds
    it; any other bind error (an address this host does not have) as itself."""
    with reusable_socket(host) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise PortTaken(exc.errno, f"port {port} is already in use on {host}") from exc
        return int(probe.getsockname()[1])


def in_use(host: str, port: int) -> bool:
    """Whether a server could not bind ``host:port`` (taken, or not an address of this host)."""
    try:
        bindable_port(host, port)
    except OSError:
        return True
    return False
