"""Items of /internal/v1.0/digital-assets: the object store's ``manuals/`` objects."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from ductwork.contract.encoding import format_datetime

MANUALS_PREFIX = "manuals/"


def object_url(endpoint_url: str, bucket: str, key: str) -> str:
    """Path-style URL ``<endpoint>/<bucket>/<key>``, the key percent-encoded except ``/``."""
    return f"{endpoint_url.rstrip('/')}/{bucket}/{quote(key, safe='/')}"


def manual_item(
    key: str, url: str, size: int, last_modified: datetime, etag: str, content_type: str | None
) -> dict[str, Any]:
    """One listing item, in the contract's member order and forms."""
    return {
        "key": key,
        "url": url,
        "sizeBytes": size,
        "lastModified": format_datetime(last_modified),
        "etag": etag.strip('"'),
        "contentType": content_type,
    }
