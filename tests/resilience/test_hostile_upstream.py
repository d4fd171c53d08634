"""``ductwork sync`` against a hostile upstream, run as operators run it: a process on a data
folder on disk. The sandbox is switched, one way at a time, to a lead list that ignores its
cursor, page-number lists that ignore ``page`` and report a billion pages, gzip bombs, and
answers with thousands of header fields.

Each time, the sync must end within a minute, its peak memory under a gigabyte, with a step's
line naming the path and the rule broken; the warehouse and the published snapshot stay as they
were; and once the upstream behaves again, the next sync publishes an exact mirror.

The tests share one sandbox (the tiny scale) and one data folder, synced once before the
first: each ends with a clean sync, which is where the next begins.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from ductwork import snapshots
from ductwork.contract.paths import DATA_WAREHOUSE_DIGITAL_ASSETS, LEADS
from ductwork.settings import HomeSettings
from sandbox.fault_settings import Faults
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import both_keys, compare_all, mirror_requests
from tests.helpers.cli import ROOT, sync_env
from tests.helpers.sync import api_over, mutate

HOSTILE_SYNC_S = 60.0  # a refused sync ends well within this (a few seconds at tiny scale)
CLEAN_SYNC_S = 240.0
PEAK_LIMIT_BYTES = 1 << 30
# Columns that say when a run wrote a row or a resume point, not what the upstream holds.
RUN_TIME_COLUMNS = {"synced_at"}
RUN_TIME_TABLE_COLUMNS = {("sync_state", "updated_at")}
CHANGES = {"assets_updated": 60, "assets_added": 20, "leads_added": 30, "products_changed": 10}


@dataclass(frozen=True)
class Hostile:
    """One hostile way of answering, and the line a sync against it must print."""

    switch: str
    step: str
    refusal: str  # how the step's line goes on after its name

    def faults(self) -> Faults:
        return Faults(**{self.switch: True})


HOSTILE = [
    Hostile("loop_cursor", "crm_leads", f"GET {LEADS}: refused, the cursor does not move forward"),
    Hostile(
        "endless_pages",
        "warehouse_digital_assets",
        # The first page asked for after the resume point lists its own asset alone.
        f"GET {DATA_WAREHOUSE_DIGITAL_ASSETS}: refused, page 1 of 1,000,000,000 holds 1 record; a "
        "page before the last holds count (1000)",
    ),
    Hostile(
        "gzip_bomb",
        "crm_leads",
        f"GET {LEADS}: refused, the body is larger than 67,108,864 bytes after decompression "
        "(DUCTWORK_UPSTREAM_MAX_BODY_BYTES)",
    ),
    Hostile(
        "header_flood",
        "crm_leads",
        f"GET {LEADS}: refused, the answer has more than 100 header fields",
    ),
]


@dataclass(frozen=True)
class SyncOutcome:
    """How one ``ductwork sync`` process ended."""

    exit_code: int
    output: str
    peak_rss_bytes: int
    seconds: float


def measured_sync(env: dict[str, str], limit_s: float) -> SyncOutcome:
    """Run ``ductwork sync`` in a session of its own and reap it with ``wait4``, which reports
    that very process's peak resident memory; killed (and the test failed) past ``limit_s``."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "sync"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    reaped: list[tuple[int, int, object]] = []
    reaper = threading.Thread(target=lambda: reaped.append(os.wait4(process.pid, 0)))
    reaper.start()
    reaper.join(limit_s)
    late = reaper.is_alive()
    if late:
        os.killpg(process.pid, signal.SIGKILL)
        reaper.join(30)
    seconds = time.monotonic() - started
    reader.join(30)
    process.stdout.close()
    _, status, usage = reaped[0]
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    output = "".join(lines)
    assert not late, f"`ductwork sync` still ran {limit_s:.0f} s later:\n{output[-6000:]}"
    return SyncOutcome(process.returncode, output, usage.ru_maxrss * 1024, seconds)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Mirror:
    """The shared sandbox and the data folder synced from it."""

    upstream: SandboxHandle
    home: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def mirror(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mirror]:
    with object_store.sandbox(4404, "tiny") as upstream:
        home = tmp_path_factory.mktemp("hostile-upstream")
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        first = measured_sync(env, CLEAN_SYNC_S)
        assert first.exit_code == 0, first.output[-6000:]
        yield Mirror(upstream, home, env)


@dataclass(frozen=True)
class Published:
    """What the data folder serves: the pointer, the snapshot files and the current one's
    bytes."""

    pointer: str
    files: tuple[str, ...]
    current_sha256: str


def published(home: Path) -> Published:
    folder = HomeSettings(home=home).snapshots_dir
    current = snapshots.current(folder)
    assert current is not None
    return Published(
        (folder / snapshots.POINTER).read_text(encoding="utf-8"),
        tuple(sorted(path.name for path in folder.iterdir())),
        hashlib.sha256(current.path.read_bytes()).hexdigest(),
    )


def warehouse_tables(home: Path) -> dict[str, str]:
    """A content hash of every warehouse table, rows in a fixed order, run-time columns left
    out."""
    hashes = {}
    path = HomeSettings(home=home).warehouse_path
    with duckdb.connect(str(path), read_only=True) as con:
        for (table,) in con.execute("SHOW TABLES").fetchall():
            columns = [
                row[0]
                for row in con.execute(f'DESCRIBE "{table}"').fetchall()
                if row[0] not in RUN_TIME_COLUMNS and (table, row[0]) not in RUN_TIME_TABLE_COLUMNS
            ]
            listed = ", ".join(f'"{column}"' for column in columns)
            rows = con.execute(f'SELECT {listed} FROM "{table}" ORDER BY ALL').fetchall()
            hashes[table] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return hashes


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.switch for h in HOSTILE])
def test_a_sync_against_a_hostile_upstream_fails_fast_in_bounded_memory_changing_nothing(
    mirror: Mirror, hostile: Hostile
) -> None:
    served, stored = published(mirror.home), warehouse_tables(mirror.home)
    mirror.upstream.state.faults = hostile.faults()
    try:
        outcome = measured_sync(mirror.env, HOSTILE_SYNC_S)
    finally:
        mirror.upstream.state.faults = Faults()
    assert outcome.exit_code == 1, outcome.output[-6000:]
    assert outcome.peak_rss_bytes < PEAK_LIMIT_BYTES, outcome.peak_rss_bytes
    failed = [
        line for line in outcome.output.splitlines() if line.startswith(f"  FAILED {hostile.step}:")
    ]
    assert len(failed) == 1, outcome.output[-6000:]
    assert failed[0].startswith(f"  FAILED {hostile.step}: {hostile.refusal}"), failed[0]
    assert published(mirror.home) == served
    assert warehouse_tables(mirror.home) == stored

    # The upstream behaves again (and has changed): the next sync publishes an exact mirror.
    mutate(mirror.upstream, **CHANGES)
    clean = measured_sync(mirror.env, CLEAN_SYNC_S)
    assert clean.exit_code == 0, clean.output[-6000:]
    assert published(mirror.home).pointer != served.pointer
    with api_over(mirror.home) as api:
        requests = mirror_requests(mirror.upstream)
        compare_all(mirror.upstream, api, requests, both_keys(mirror.upstream, api))
