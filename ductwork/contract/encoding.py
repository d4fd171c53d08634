"""Wire encodings: SKU percent-encoding, date-times and JSON bytes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import orjson

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Matched whole (``fullmatch``): ``$`` would also accept a trailing newline.
_DATE_TIME = r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
_RFC3339 = re.compile(_DATE_TIME + r"([Zz]|[+-]\d{2}:\d{2})", re.ASCII)
# Values inside records may also carry ISO 8601's basic offset (``+0000``), as Salesforce
# writes it; query parameters may not (the wire contract makes that a 400).
_RECEIVED = re.compile(_DATE_TIME + r"([Zz]|[+-]\d{2}:?\d{2})", re.ASCII)
# The contract's own form, which nearly every value a sync reads already has. Both patterns
# above accept it, and ``datetime.fromisoformat`` reads it as it stands: a sync reads hundreds
# of thousands of these, and the general path's rebuilding costs several times more.
_CONTRACT_FORM = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def quote_sku(sku: str) -> str:
    """Percent-encode a SKU for a path: everything outside RFC 3986's unreserved set, as UTF-8."""
    return quote(sku, safe="")


def format_datetime(moment: datetime) -> str:
    """Render a date-time the contract's way: UTC, milliseconds, ``Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_datetime(text: str) -> datetime:
    """Parse an RFC 3339 date-time with a time and an offset; raise ValueError otherwise.

    This is the contract's rule for query parameters. Fractions longer than microseconds are
    truncated, which cannot change a strict comparison against the millisecond timestamps the
    service emits.
    """
    return _parse(_RFC3339, text)


def parse_received_datetime(text: str) -> datetime:
    """Parse a date-time found in a record: RFC 3339, or with a ``+0000``-style offset."""
    return _parse(_RECEIVED, text)


def in_contract_form(text: str) -> bool:
    """Whether ``text`` is written the contract's way (UTC, milliseconds, ``Z``); the date and
    time it names may still be impossible (a 13th month): parsing tells that."""
    return _CONTRACT_FORM.fullmatch(text) is not None


def _parse(pattern: re.Pattern[str], text: str) -> datetime:
    if in_contract_form(text):
        return datetime.fromisoformat(text)  # ValueError for an impossible date or time
    match = pattern.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 date-time with time and offset: {text!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    zone = "+00:00" if offset in ("Z", "z") else f"{offset[:3]}:{offset[-2:]}"
    base = f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micro:06d}{zone}"
    try:
        return datetime.fromisoformat(base).astimezone(UTC)
    except OverflowError as exc:  # e.g. year 1 with a positive offset
        raise ValueError(f"date-time out of range: {text!r}") from exc


def epoch_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch (exact, no float rounding)."""
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def dumps(value: Any) -> bytes:
    """Serialise to compact UTF-8 JSON bytes (non-ASCII kept as is)."""
    return orjson.dumps(value)


def loads(data: bytes | str) -> Any:
    """Parse JSON bytes or text."""
    return orjson.loads(data)


def object_url(endpoint_url: str, bucket: str, key: str) -> str:
    """Path-style URL ``<endpoint>/<bucket>/<key>``, the key percent-encoded except ``/``."""
    return f"{endpoint_url.rstrip('/')}/{bucket}/{quote(key, safe='/')}"
