"""The per-record shortcuts a sync takes answer exactly as the general path does.

Unit tests (no sync, no server): each shortcut is compared with the general code it skips, on
the inputs where the two could part: impossible dates in the contract's form, other offsets,
records of several shapes in one batch, and a stop signal arriving between requests.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime

import pytest

from ductwork import stop_signals
from ductwork.contract.encoding import (
    _RECEIVED,
    format_datetime,
    in_contract_form,
    parse_datetime,
    parse_received_datetime,
)
from ductwork.streams.data_warehouse import DIGITAL_ASSET_RECORD
from ductwork.upstream.schema_drift import DriftTally
from ductwork.upstream.timestamps import canonical, canonical_or_received

TEXTS = [
    "2024-01-02T03:04:05.123Z",
    "2024-02-29T23:59:59.999Z",
    "9999-12-31T23:59:59.999Z",
    "1970-01-01T00:00:00.000Z",
    # The contract's form, naming no real instant: both paths must refuse them.
    "2023-02-29T00:00:00.000Z",
    "2024-13-02T03:04:05.123Z",
    "0000-01-01T00:00:00.000Z",
    "2024-01-02T24:00:00.000Z",
    "2024-01-02T03:04:60.000Z",
    # Other forms: the general path only.
    "2024-01-02T03:04:05Z",
    "2024-01-02T03:04:05.123456789+00:00",
    "2024-01-02T05:04:05.123+0200",
    "2024-01-01T19:04:05.1-08:00",
    "2024-01-02t03:04:05.123z",
    "2024-01-02 03:04:05.123Z",
    "",
]


def _general(text: str) -> datetime:
    """The general path, written out: the pattern's groups rebuilt for ``fromisoformat``."""
    match = _RECEIVED.match(text)
    if match is None:
        raise ValueError(text)
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    zone = "+00:00" if offset in ("Z", "z") else f"{offset[:3]}:{offset[-2:]}"
    rebuilt = f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micro:06d}{zone}"
    return datetime.fromisoformat(rebuilt).astimezone(UTC)


def _outcome(read, text: str) -> object:
    try:
        return read(text)
    except ValueError:
        return ValueError


@pytest.mark.parametrize("text", TEXTS)
def test_reading_a_received_date_time_matches_the_general_path(text: str) -> None:
    assert _outcome(parse_received_datetime, text) == _outcome(_general, text)
    if in_contract_form(text):
        assert _outcome(parse_datetime, text) == _outcome(_general, text)


@pytest.mark.parametrize("text", TEXTS)
def test_a_date_time_put_in_the_contracts_form_matches_parsing_and_formatting_it(
    text: str,
) -> None:
    general = _outcome(_general, text)
    expected = ValueError if general is ValueError else format_datetime(general)
    assert _outcome(canonical, text) == expected
    assert canonical_or_received(text) == (text if expected is ValueError else expected)


def test_drift_counts_with_remembered_verdicts_equal_judging_every_record() -> None:
    base = {
        "assetId": "DA-1", "sku": "S-1", "assetType": "Image", "title": "t", "url": "u",
        "mimeType": "image/png", "language": "en", "fileSizeBytes": 10,
        "createdAt": "2024-01-01T00:00:00.000Z", "updatedAt": "2024-01-01T00:00:00.000Z",
    }  # fmt: skip
    shapes = [
        base,
        {**base, "sku": None},  # an allowed null
        {**base, "checksum": "x"},  # an unknown member
        {k: v for k, v in base.items() if k != "title"},  # a missing member
        {**base, "fileSizeBytes": "10"},  # a mistyped member
        {**base, "fileSizeBytes": True},  # a boolean is not a number
        dict(reversed(base.items())),  # the same members in another order
    ]
    records = [shapes[i % len(shapes)] for i in range(70)]
    remembered = DriftTally(DIGITAL_ASSET_RECORD)
    remembered.count(records[:30])
    remembered.count(records[30:])
    judged_one_by_one: dict[str, int] = {}
    for record in records:
        fresh = DriftTally(DIGITAL_ASSET_RECORD)  # remembers nothing yet: judges the record
        fresh.count([record])
        for name, value in fresh.as_metadata().items():
            judged_one_by_one[name] = judged_one_by_one.get(name, 0) + value
    assert (
        remembered.as_metadata()
        == judged_one_by_one
        == {
            "schema_drift_records": 40,
            "schema_drift_unknown_members": 10,
            "schema_drift_missing_members": 10,
            "schema_drift_mistyped_members": 20,
        }
    )


def test_a_stop_signal_noted_only_in_the_pipe_is_seen_at_the_next_request_check() -> None:
    # The lost-interrupt case: the signal reached the wake-up pipe but no handler of ours ran.
    with stop_signals.WatchStopSignals():
        assert stop_signals.stopping() is False
        assert stop_signals._pipe is not None
        watched_write = signal.set_wakeup_fd(-1)  # the watch's write end, put back below
        try:
            os.write(watched_write, bytes([signal.SIGTERM]))
        finally:
            signal.set_wakeup_fd(watched_write, warn_on_full_buffer=False)
        stop_signals._next_read = 0.0  # the pipe's next read is due, as it is 20 ms later
        assert stop_signals.stopping() is True
    assert stop_signals.stopping() is False  # outside a watch, nothing stops
