"""Building an Arrow batch of rows: ``Columns.table`` against ``pa.Table.from_pylist``.

    uv run --frozen python -m bench.table_build

A reference, with no target: the sync builds one such batch per stored page or detail batch,
on the thread that stores while the event loop waits for the GIL. Both ways build the same
table from the same rows (checked first), in one process, interleaved, with the collector off;
each figure is the median of the repeats.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from ductwork.streams.crm import DETAIL_COLUMNS as DETAIL_SCHEMA
from ductwork.streams.data_warehouse import DIGITAL_ASSET_COLUMNS as DIGITAL_ASSET_SCHEMA
from ductwork.warehouse.columns import Columns

ROWS = 10_000
REPEATS = 21
MISSING = 0.1  # the share of members a row leaves out (null in the table)


def sample_rows(columns: Columns, count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` rows of ``columns`` with values of each declared type, some members missing."""
    now = datetime.now(UTC)
    values: dict[str, Callable[[int, str], Any]] = {
        "string": lambda n, name: f"{name}-{n}",
        "int32": lambda n, _: n,
        "int64": lambda n, _: n * 1_000,
        "float64": lambda n, _: n * 1.5,
        "bool": lambda n, _: n % 2 == 0,
        "timestamp": lambda _n, _name: now,
    }
    return [
        {name: values[kind](n, name) for name, kind in columns.columns if rng.random() >= MISSING}
        for n in range(count)
    ]


def time_into(build: Callable[[], object], times: list[float]) -> None:
    """Time one ``build``, appending its seconds to ``times``."""
    started = time.perf_counter()
    build()
    times.append(time.perf_counter() - started)


def main() -> None:
    rng = random.Random(1)
    gc.disable()
    for label, columns in (
        ("digital assets", DIGITAL_ASSET_SCHEMA),
        ("lead details", DETAIL_SCHEMA),
    ):
        rows = sample_rows(columns, ROWS, rng)

        def by_column(rows: list[dict[str, Any]] = rows, columns: Columns = columns) -> pa.Table:
            return pa.Table.from_pylist(rows, schema=columns.schema)

        def as_structs(rows: list[dict[str, Any]] = rows, columns: Columns = columns) -> pa.Table:
            return columns.table(rows)

        if not by_column().equals(as_structs()):
            raise SystemExit(f"{label}: the two ways built different tables")
        old: list[float] = []
        new: list[float] = []
        for _ in range(REPEATS):
            time_into(by_column, old)
            time_into(as_structs, new)
        old_ms, new_ms = statistics.median(old) * 1000, statistics.median(new) * 1000
        print(
            f"{label}, {ROWS:,} rows: from_pylist {old_ms:.1f} ms, Columns.table {new_ms:.1f} ms"
            f" ({old_ms / new_ms:.2f} x; median of {REPEATS}, interleaved)"
        )


if __name__ == "__main__":
    main()
