"""The production dagster.yaml keeps runs and events in a real PostgreSQL server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest

from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.test_cli import ductwork, sync_env

ROOT = Path(__file__).parent.parent


@dataclass(frozen=True)
class Postgres:
    """A PostgreSQL server on loopback."""

    port: int
    user: str = "postgres"
    db: str = "postgres"

    def connect(self) -> psycopg2.extensions.connection:
        """A connection to its database."""
        return psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=self.db)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(*command: str) -> subprocess.CompletedProcess:
    # initdb refuses to run as root; the server's files belong to the postgres user.
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *command],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


@pytest.fixture()
def postgres() -> Iterator[Postgres]:
    """A fresh server in a folder of its own (socket included), stopped and removed after."""
    if shutil.which("initdb") is None or shutil.which("runuser") is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    folder = Path(tempfile.mkdtemp(prefix="ductwork-pg-"))
    shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    port = _free_port()
    _as_postgres("initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    _as_postgres("pg_ctl", "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        yield Postgres(port)
    finally:
        _as_postgres("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sync_on_the_production_instance_lands_its_run_and_events_in_postgres(
    postgres: Postgres,
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path: Path,
) -> None:
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", dagster_home / "dagster.yaml")
    env = {
        **sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY),
        "DUCTWORK_PG_HOST": "127.0.0.1",
        "DUCTWORK_PG_PORT": str(postgres.port),
        "DUCTWORK_PG_DB": postgres.db,
        "DUCTWORK_PG_USER": postgres.user,
        "DUCTWORK_PG_PASSWORD": "unused-with-trust-auth",
    }
    done = ductwork("sync", "--select", "catalog_items", env=env)
    assert done.returncode == 0, done.stderr[-3000:]

    with postgres.connect() as con, con.cursor() as cur:
        cur.execute("SELECT run_id, pipeline_name, status FROM runs")
        runs = cur.fetchall()
        assert [(job, status) for _, job, status in runs] == [("sync_all", "SUCCESS")]
        cur.execute(
            "SELECT count(*) FROM event_logs WHERE run_id = %s AND asset_key IS NOT NULL "
            "AND dagster_event_type = 'ASSET_MATERIALIZATION'",
            [runs[0][0]],
        )
        (materializations,) = cur.fetchone()
        cur.execute("SELECT asset_key FROM asset_keys ORDER BY asset_key")
        assets = [row[0] for row in cur.fetchall()]
    # catalog_items and the publish that followed it
    assert materializations == 2
    assert '["catalog_items"]' in assets and '["serving_snapshot"]' in assets
    # No SQLite run, event or schedule storage was created beside the configuration.
    assert not list(dagster_home.rglob("*.db"))
