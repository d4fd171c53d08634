"""SIGINT, SIGTERM and SIGHUP end a CLI run as canceled, within seconds, holding nothing.

While Dagster executes a run it handles SIGINT and SIGTERM itself: the signal interrupts the
running step, and the run ends as canceled only if the instance already says the run is being
canceled; otherwise Dagster records an unexpected interruption and fails it. The signal
itself cannot be intercepted first (Dagster installs its own handlers, and blocking signals in
the main thread would also block them in every child it starts). So the process notes every
stop signal on a wake-up pipe, which Python's C-level handler writes before any Python handler
runs, and the run's warehouse resource, whose teardown always precedes the run's end, reads the
pipe and marks the run canceling in time (``assets.warehouse_admission``).
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_pipe: int | None = None  # read end of the wake-up pipe, while a CLI run is watched
_received: list[int] = []
# ``stopping`` runs before every upstream request, about a hundred thousand times a sync: it
# reads the pipe at most this often (a read that finds nothing raises, which costs more than
# the request's own bookkeeping), so a stop is still seen within a few hundredths of a second.
_READ_EVERY_S = 0.02
_next_read = 0.0


def stop_signal_received() -> int | None:
    """The first stop signal this process received while watched, or None."""
    if _pipe is not None:
        try:
            data = os.read(_pipe, 512)
        except BlockingIOError:
            data = b""
        _received.extend(byte for byte in data if byte in STOP_SIGNALS)
    return _received[0] if _received else None


def stopping() -> bool:
    """Whether the run being watched received a stop signal (never outside a watch, so a
    long-lived process is not stopped by a signal an earlier watch noted)."""
    global _next_read
    if _pipe is None:
        return False
    if _received:
        return True
    now = time.monotonic()
    if now < _next_read:
        return False
    _next_read = now + _READ_EVERY_S
    return stop_signal_received() is not None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    stop_signal_received()
    if len(_received) > 1:
        return  # the run is already stopping: a second signal must not cut its clean-up short
    raise KeyboardInterrupt


class WatchStopSignals(AbstractContextManager["WatchStopSignals"]):
    """Within the block (main thread only), the first stop signal interrupts the process as
    SIGINT does (Dagster's own handlers take over while a run executes), later ones are
    ignored, and all are noted for ``stop_signal_received``; ``exit_code`` is the shell's code
    for the first one (130, 143 or 129)."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._previous_fd = -1
        self._write = -1

    def __enter__(self) -> WatchStopSignals:
        global _pipe, _next_read
        read, self._write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(self._write, False)
        _pipe = read
        _received.clear()
        _next_read = 0.0
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, _interrupt)
        return self

    @property
    def exit_code(self) -> int | None:
        """128 + the first stop signal's number, or None when none arrived."""
        received = stop_signal_received()
        return None if received is None else 128 + received

    def __exit__(self, *exc_info: object) -> None:
        global _pipe
        stop_signal_received()  # keep what arrived before the pipe closes
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if _pipe is not None:
            os.close(_pipe)
        os.close(self._write)
        _pipe = None
