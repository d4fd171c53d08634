"""What a ``ductwork sync`` process with nothing new to store loads, and the parts that keep
its start-up short: no pyarrow, pandas or boto3, collections paused while it loads."""

from __future__ import annotations

import asyncio
import gc
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ductwork.upstream.bounded_map import map_bounded
from ductwork.warehouse.columns import Columns
from pipelines.sync_command import freeze_what_is_loaded
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ROOT, sync_env

# Loaded only by a run that writes rows (Arrow tables) or mirrors images and manuals with
# boto3's transfers; a run with nothing new needs none of them.
NOT_LOADED = ("pyarrow", "pandas", "numpy", "boto3", "s3transfer")


def test_a_sync_with_nothing_new_loads_neither_arrow_nor_boto3(
    synced_home: Path,
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    """A second ``ductwork sync`` of an unchanged upstream, as its own process, stores nothing
    new and imports none of pyarrow, pandas, numpy, boto3 or s3transfer (``-X importtime``
    lists every module the process imported)."""
    home = tmp_path / "home"
    shutil.copytree(synced_home, home)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pipelines.cli", "sync"],
        cwd=ROOT, env=sync_env(home, upstream, object_store, UPSTREAM_KEY),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rows changed: none" in done.stdout
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)\s*$", done.stderr, flags=re.M))
    assert "dagster" in imported and "botocore" in imported  # the listing is complete
    assert not imported & set(NOT_LOADED), sorted(imported & set(NOT_LOADED))


def test_freezing_what_is_loaded_turns_collections_back_on() -> None:
    """``ductwork sync`` starts with the collector off; the run turns it on once it has
    frozen what is loaded, so the rest of the run collects as usual."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        freeze_what_is_loaded()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        if not was_enabled:
            gc.disable()


def test_map_bounded_keeps_order_and_at_most_workers_in_flight() -> None:
    """Every item's result, in the items' order, with never more than ``workers`` fetches
    running at once (the slowest items first, so a wrong order would show)."""
    running = 0
    most = 0

    async def fetch(item: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(50 - item):  # earlier items yield longer
            await asyncio.sleep(0)
        running -= 1
        return item * 10

    results = asyncio.run(map_bounded(fetch, list(range(50)), workers=4))
    assert results == [item * 10 for item in range(50)]
    assert most == 4


def test_map_bounded_raises_the_first_error_as_is_and_stops_the_other_workers() -> None:
    """A failing fetch ends the map with its own exception (not a group), and the other
    workers start no new fetch once it has failed."""
    started: list[int] = []

    class Refused(RuntimeError):
        pass

    async def fetch(item: int) -> int:
        started.append(item)
        await asyncio.sleep(0)
        if item == 3:
            raise Refused(f"item {item}")
        await asyncio.Event().wait()  # the others stay in flight until they are cancelled
        return item

    with pytest.raises(Refused, match="item 3"):
        asyncio.run(map_bounded(fetch, list(range(1000)), workers=4))
    assert len(started) < 20, started


def test_columns_build_the_arrow_schema_the_warehouse_expects() -> None:
    """Declared column types map to Arrow's (timestamps in microseconds, UTC); a table of rows
    follows the declaration, a missing member is null, an extra one is dropped; an unknown type
    is refused at once."""
    import pyarrow as pa

    columns = Columns(("id", "string"), ("n", "int32"), ("at", "timestamp"), ("ok", "bool"))
    assert columns.names == ["id", "n", "at", "ok"]
    assert columns.schema == pa.schema(
        [("id", pa.string()), ("n", pa.int32()), ("at", pa.timestamp("us", tz="UTC")),
         ("ok", pa.bool_())]
    )  # fmt: skip
    moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    table = columns.table([{"id": "a", "n": 1}, {"id": "b", "at": moment, "ok": True, "x": 9}])
    assert table.schema == columns.schema
    assert table.to_pylist() == [
        {"id": "a", "n": 1, "at": None, "ok": None},
        {"id": "b", "n": None, "at": moment, "ok": True},  # a key that is no column is ignored
    ]
    assert columns.table([]).schema == columns.schema and columns.table([]).num_rows == 0
    with pytest.raises(ValueError, match="unknown column types"):
        Columns(("id", "varchar"))
