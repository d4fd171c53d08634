"""What the upstream client layer raises when the upstream answers something a sync cannot use.

Each message is one line that names the path; none carries the API key.
"""

from __future__ import annotations


class UpstreamError(RuntimeError):
    """The upstream answered something the sync cannot use."""


class UpstreamAuthError(UpstreamError):
    """The upstream rejected the API key: retrying cannot help."""


class UpstreamContractError(UpstreamError):
    """The upstream broke a rule a walk relies on to end, or to end in bounded memory: a cursor
    that does not move forward, a page repeating one already seen, totals that contradict the
    pages, a body larger than the cap. Asking again would only repeat it, so the walk is
    refused at once and nothing is retried."""
