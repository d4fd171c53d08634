"""Date-times written the many ways ISO 8601 allows, as an upstream may write them.

With ``Faults.mixed_timestamps`` on, list items leave the sandbox with some of their date-times
in another form than the contract's (``+0000`` as Salesforce writes it, ``+00:00``, another
offset, a longer or a missing fraction). Every form names the same millisecond, so the order of
the list is unchanged; each record keeps its form from one answer to the next (it is chosen
from the record's id), so a mirror that stores records as received can still equal the
upstream byte for byte.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

from ductwork.contract.encoding import dumps, loads, parse_received_datetime

Style = Callable[[datetime], str]


def _fraction(moment: datetime) -> str:
    """The milliseconds as the shortest fraction that keeps them, or nothing for a whole
    second."""
    return f".{moment.microsecond // 1000:03d}".rstrip("0").rstrip(".")


def _in_zone(moment: datetime, hours: int, minutes: int = 0) -> datetime:
    return moment.astimezone(timezone(timedelta(hours=hours, minutes=minutes)))


STYLES: tuple[Style, ...] = (
    lambda m: m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}Z",
    lambda m: m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond // 1000:03d}+0000",
    lambda m: m.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00"),
    lambda m: m.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(m) + "Z",
    lambda m: _in_zone(m, 5, 30).strftime("%Y-%m-%dT%H:%M:%S.%f+05:30"),
    lambda m: _in_zone(m, -8).strftime("%Y-%m-%dT%H:%M:%S") + _fraction(m) + "-08:00",
)


def restyled(text: str, chooser: str) -> str:
    """``text`` (a contract date-time) in the form ``chooser`` picks, naming the same instant."""
    moment = parse_received_datetime(text).astimezone(UTC)
    return STYLES[zlib.crc32(chooser.encode()) % len(STYLES)](moment)


def styled_record(body: bytes, id_member: str, members: tuple[str, ...]) -> bytes:
    """A record's JSON with its date-time ``members`` each in the form its id picks."""
    record = loads(body)
    for name in members:
        value = record.get(name)
        if isinstance(value, str):
            record[name] = restyled(value, f"{record.get(id_member)}:{name}")
    return dumps(record)
