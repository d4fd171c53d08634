"""An interrupted ingest step stops its run instead of being retried.

Dagster applies an asset's retry policy to interrupts too: a step interrupted by SIGTERM or
SIGINT (or by a termination from the UI) is scheduled again, and the run carries on as if
nothing had happened. ``stops_on_interrupt`` turns the interrupt into ``RunInterrupted``,
which Dagster's step boundary passes through untouched (it is a framework error) and its
executor then treats as the interrupt it is (it is also an execution interrupt): the step
fails, the run stops, and it ends as canceled when the instance says it is being canceled.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

F = TypeVar("F", bound=Callable[..., Any])
INTERRUPTS = (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)


class RunInterrupted(dg.DagsterError, dg.DagsterExecutionInterruptedError):
    """The step was interrupted; not to be retried."""


def stops_on_interrupt(compute: F) -> F:
    """Wrap an asset's compute function (plain or generator) so that interrupts stop the run.

    The wrapper carries the function's evaluated signature, which Dagster reads to find the
    context and the resources the asset takes.
    """
    if inspect.isgeneratorfunction(compute):

        @functools.wraps(compute)
        def stopping(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from compute(*args, **kwargs)
            except INTERRUPTS as interrupt:
                raise RunInterrupted("interrupted; the run stops") from interrupt

    else:

        @functools.wraps(compute)
        def stopping(*args: Any, **kwargs: Any) -> Any:
            try:
                return compute(*args, **kwargs)
            except INTERRUPTS as interrupt:
                raise RunInterrupted("interrupted; the run stops") from interrupt

    stopping.__annotations__ = typing.get_type_hints(compute)
    stopping.__signature__ = inspect.signature(compute, eval_str=True)  # type: ignore[attr-defined]
    return typing.cast(F, stopping)
