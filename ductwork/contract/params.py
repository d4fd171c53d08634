"""Query-parameter rules shared by the sandbox and the read API.

Each reader takes the raw text (or None when absent) and returns a typed value, or raises the
contract's 400 naming the parameter.
"""

from __future__ import annotations

import re
from datetime import datetime

from ductwork.contract.encoding import parse_datetime
from ductwork.contract.errors import ApiError, invalid

MAX_COUNT = 1000
DEFAULT_COUNT = 100
# Integer parameters have at most this many digits, so every accepted value fits in 64 bits.
MAX_DIGITS = 18
MAX_INTEGER = 10**MAX_DIGITS - 1
# Matched whole (``fullmatch``): ``$`` would also accept a trailing newline.
_INTEGER = re.compile(rf"-?[0-9]{{1,{MAX_DIGITS}}}")

REL_TYPES: tuple[str, ...] = ("Pairing", "Standalone", "Combinations")


def read_int(name: str, raw: str | None, default: int, low: int, high: int | None) -> int:
    """An integer parameter within [low, high]; absent means ``default``."""
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        raise invalid(name, f"{name} must be an integer")
    value = int(raw)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise invalid(name, f"{name} must be {bound}")
    return value


def read_count(raw: str | None) -> int:
    """``count``: 1..1000, default 100."""
    return read_int("count", raw, DEFAULT_COUNT, 1, MAX_COUNT)


def read_page(raw: str | None) -> int:
    """``page``: at least 1, default 1."""
    return read_int("page", raw, 1, 1, None)


def read_datetime(name: str, raw: str | None) -> datetime | None:
    """An RFC 3339 date-time parameter with time and offset, or None when absent."""
    if raw is None:
        return None
    try:
        return parse_datetime(raw)
    except ValueError:
        message = f"{name} must be an RFC 3339 date-time with a time and an offset"
        raise invalid(name, message) from None


def read_rel_type(raw: str | None) -> str | None:
    """``relType``: one of Pairing, Standalone, Combinations."""
    if raw is None:
        return None
    if raw not in REL_TYPES:
        raise invalid("relType", "relType must be one of " + ", ".join(REL_TYPES))
    return raw


def read_relationship_id(raw: str) -> int:
    """A pairing's relationship id in the path: an integer."""
    if not _INTEGER.fullmatch(raw):
        raise invalid("relationship_id", "relationship_id must be an integer")
    return int(raw)


def read_filter(raw: str | None) -> str | None:
    """A case-insensitive exact-match filter, folded for comparison; empty means no filter."""
    if raw is None or raw == "":
        return None
    return raw.lower()


def page_bounds(page: int, count: int) -> tuple[int, int]:
    """Start and end offsets of a page."""
    start = (page - 1) * count
    return start, start + count


def total_pages(total_items: int, count: int) -> int:
    """ceil(total / count); 0 when nothing matches."""
    return -(-total_items // count)


def pagination(page: int, count: int, total_items: int) -> dict[str, int]:
    """The contract's pagination object."""
    return {
        "page": page,
        "count": count,
        "totalItems": total_items,
        "totalPages": total_pages(total_items, count),
    }


__all__ = [
    "REL_TYPES",
    "ApiError",
    "page_bounds",
    "pagination",
    "read_count",
    "read_datetime",
    "read_filter",
    "read_int",
    "read_page",
    "read_rel_type",
    "read_relationship_id",
]
