"""What every API-ingest asset shares: its policies, failing clearly, reporting its cost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import dagster as dg

from assets.interrupts import stops_on_interrupt
from assets.resources import UpstreamResource
from ductwork.sync import context as sync_context
from ductwork.sync.context import Fetched, StepResult
from ductwork.upstream.client import UpstreamAuthError, UpstreamClient, UpstreamContractError

T = TypeVar("T")

# On top of the client's per-request retries: a whole asset retried after a pause.
INGEST_RETRY = dg.RetryPolicy(
    max_retries=2, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.FULL
)
OWNERS = ["team:data-platform"]
# Assets that write the warehouse run one at a time: DuckDB allows a single writer.
WAREHOUSE_POOL = "duckdb_warehouse"


def ingest_asset(
    *, group: str, description: str, kinds: set[str] | None = None, **extra: Any
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``@dg.asset`` with what every ingest asset shares: owners, the warehouse pool (one
    writer at a time) and the retry policy, which an interrupt does not trigger."""
    define = dg.asset(
        group_name=group,
        kinds=kinds or {"api", "duckdb"},
        owners=OWNERS,
        pool=WAREHOUSE_POOL,
        retry_policy=INGEST_RETRY,
        description=description,
        **extra,
    )
    return lambda compute: define(stops_on_interrupt(compute))


@contextmanager
def failing_clearly() -> Iterator[None]:
    """A rejected API key, or an upstream that breaks the rules a walk relies on, fails the
    asset at once, without Dagster's retries: asking again would get the same answer."""
    try:
        yield
    except (UpstreamAuthError, UpstreamContractError) as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None


def fetch(upstream: UpstreamResource, read: Callable[[UpstreamClient], Awaitable[T]]) -> Fetched[T]:
    """Run an async read against the upstream on a fresh client and event loop."""
    with failing_clearly():
        return sync_context.fetch(upstream, read)


def run_metadata(fetched: Fetched[object], rows: int, **extra: float | int | str) -> dict:
    """Numeric run metadata: row count, requests, retries, 429s, bytes, duration."""
    return {
        "dagster/row_count": rows,
        **fetched.stats.as_metadata(),
        "duration_s": round(fetched.seconds, 3),
        **extra,
    }


def materialization(result: StepResult) -> dg.MaterializeResult:
    """A step's result as Dagster records it: its row count, the rows it wrote or deleted, and
    the rest of its metadata."""
    return dg.MaterializeResult(
        asset_key=result.asset,
        metadata={
            "dagster/row_count": result.rows,
            "rows_changed": result.rows_changed,
            **result.metadata,
        },
    )
