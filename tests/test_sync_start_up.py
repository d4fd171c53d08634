"""What a ``ductwork sync`` process loads (with nothing new to store: no pyarrow, pandas,
boto3 or HTTP client library; writing rows: pyarrow but still no pandas), and the parts that
keep its start-up short: collections paused while it loads."""

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

# Loaded only by a run that writes rows (Arrow tables), mirrors images and manuals with
# boto3's transfers, downloads images (aiohttp) or tells subscribers (httpx); a run with
# nothing new needs none of them.
NOT_LOADED = ("pyarrow", "pandas", "numpy", "boto3", "s3transfer", "aiohttp", "httpx")


def test_a_sync_with_nothing_new_loads_no_arrow_boto3_or_http_client_library(
    synced_home: Path,
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    """A second ``ductwork sync`` of an unchanged upstream, as its own process, stores nothing
    new and imports none of pyarrow, pandas, numpy, boto3, s3transfer, aiohttp or httpx
    (``-X importtime`` lists every module the process imported)."""
    home = tmp_path / "home"
    shutil.copytree(synced_home, home)
    printed, imported = _sync_imports(home, upstream, object_store)
    assert "rows changed: none" in printed
    assert not imported & set(NOT_LOADED), sorted(imported & set(NOT_LOADED))


def _sync_imports(
    home: Path, upstream: SandboxHandle, store: ObjectStoreServer
) -> tuple[str, set[str]]:
    """What a ``ductwork sync`` process (which must succeed) printed, and every module it
    imported, from ``-X importtime``'s listing."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pipelines.cli", "sync"],
        cwd=ROOT, env=sync_env(home, upstream, store, UPSTREAM_KEY),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)\s*$", done.stderr, flags=re.M))
    assert "dagster" in imported and "botocore" in imported  # the listing is complete
    return done.stdout, imported


def test_a_first_sync_writes_its_rows_through_arrow_without_importing_pandas(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """A first ``ductwork sync`` of every stream, as its own process, builds Arrow tables of
    the rows it writes yet never imports pandas: pyarrow's first conversion would, only to ask
    whether its input is a pandas object (about 45 MiB of a sync's peak memory)."""
    printed, imported = _sync_imports(tmp_path / "home", upstream, object_store)
    assert "rows changed: none" not in printed
    assert "pyarrow" in imported
    # The refused attempt is listed too, as a bare ``pandas``; loading pandas loads hundreds of
    # its modules.
    assert not {name for name in imported if name.startswith("pandas.")}


def test_pandas_still_imports_once_arrow_was_kept_from_it() -> None:
    """Unit test, in a fresh interpreter: rows built into an Arrow table leave pandas
    unloaded, and afterwards ``import pandas`` and Arrow's own ``to_pandas`` work as ever."""
    code = (
        "import sys\n"
        "from ductwork.warehouse.columns import Columns\n"
        "table = Columns(('id', 'string'), ('n', 'int64')).table([{'id': 'a', 'n': 1}])\n"
        "assert 'pandas' not in sys.modules\n"
        "import pandas\n"
        "frame = table.to_pandas()\n"
        "assert isinstance(frame, pandas.DataFrame) and frame['n'].tolist() == [1]\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


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
