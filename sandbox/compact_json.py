"""JSON bytes sized to fit, for records held in memory by the hundred thousand.

orjson returns its output in a buffer it does not shrink (about 4 KiB for a small record);
a million held records would cost gigabytes. Copying into an exact-size ``bytes`` fixes it.
"""

from __future__ import annotations

from typing import Any

from ductwork.contract.encoding import dumps


def dumps_compact(value: Any) -> bytes:
    """``dumps(value)`` in an exact-size buffer: for bytes that stay in memory."""
    return bytes(memoryview(dumps(value)))
