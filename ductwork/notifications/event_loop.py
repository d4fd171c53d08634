"""An event loop for one delivery pass, which nothing it started can outlive the pass in.

Deliveries are asynchronous so that one deadline covers a whole exchange: cancelling a task
closes its socket wherever the exchange stands (connecting, sending, waiting for the status
line, the headers or the body). The one blocking call left is name resolution, which asyncio
runs in a thread; those threads are daemons here, never waited for when the loop closes, so a
resolver that hangs cannot hold the pass (or the process's exit) past the deadline.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class _DaemonThreads(ThreadPoolExecutor):
    """Runs each call in a daemon thread of its own; shutting down never waits for them."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to whoever awaits it
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=work, name="ductwork-delivery-helper", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: a helper still running ends with the process."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` in a new event loop whose helper threads are never waited for."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_DaemonThreads())
        return runner.run(main)
