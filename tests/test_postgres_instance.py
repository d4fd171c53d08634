"""The production dagster.yaml keeps runs and events in a real PostgreSQL server."""

from __future__ import annotations

import pwd
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
from tests.helpers.cli import ductwork, sync_env

ROOT = Path(__file__).parent.parent
# Debian installs each major version beside the others, off PATH.
DEBIAN_POSTGRESQL = Path("/usr/lib/postgresql")
NOT_INSTALLED = "PostgreSQL is not installed: apt-get install postgresql (make test does, as root)"


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


def _version(folder: Path) -> tuple[int, ...]:
    """``/usr/lib/postgresql/16`` -> ``(16,)``; ``9.6`` -> ``(9, 6)``; anything else sorts first."""
    parts = folder.name.split(".")
    return tuple(int(part) for part in parts) if all(p.isdigit() for p in parts) else ()


def postgres_binaries(debian: Path = DEBIAN_POSTGRESQL) -> tuple[Path, Path]:
    """initdb and pg_ctl of the newest PostgreSQL Debian installed under ``debian``, else the
    ones on PATH.

    Fails the test, never skips it, when they or the ``postgres`` user to run them are missing.
    """
    folders = sorted(debian.glob("*/bin"), key=lambda b: _version(b.parent))[::-1]
    if on_path := shutil.which("initdb"):
        folders.append(Path(on_path).parent)
    for folder in folders:
        initdb, pg_ctl = folder / "initdb", folder / "pg_ctl"
        if initdb.is_file() and pg_ctl.is_file():
            break
    else:
        pytest.fail(NOT_INSTALLED, pytrace=False)
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail(NOT_INSTALLED, pytrace=False)
    return initdb, pg_ctl


def _as_postgres(*command: str | Path) -> subprocess.CompletedProcess:
    # initdb refuses to run as root; the server's files belong to the postgres user.
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, command)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"{Path(command[0]).name} failed: {done.stderr.strip()[-2000:]}", pytrace=False)
    return done


@pytest.fixture()
def postgres() -> Iterator[Postgres]:
    """A fresh server in a folder of its own (socket included), stopped and removed after."""
    initdb, pg_ctl = postgres_binaries()
    folder = Path(tempfile.mkdtemp(prefix="ductwork-pg-"))
    shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    port = _free_port()
    try:
        _as_postgres(initdb, "-D", str(data), "-A", "trust", "-U", "postgres")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
        _as_postgres(
            pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"
        )
        try:
            yield Postgres(port)
        finally:
            _as_postgres(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
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
    # catalog_items, the publish that followed it and the notifications of its changes
    assert materializations == 3
    assert '["catalog_items"]' in assets and '["serving_snapshot"]' in assets
    assert '["change_notifications"]' in assets
    # No SQLite run, event or schedule storage was created beside the configuration.
    assert not list(dagster_home.rglob("*.db"))


def _install(folder: Path) -> Path:
    """Empty executables named initdb and pg_ctl in ``folder``."""
    folder.mkdir(parents=True)
    for name in ("initdb", "pg_ctl"):
        (folder / name).touch(mode=0o755)
    return folder


def test_the_newest_debian_version_wins_over_older_ones_and_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debian = tmp_path / "debian"
    for version in ("9.6", "15", "16", "not-a-version"):
        _install(debian / version / "bin")
    monkeypatch.setenv("PATH", str(_install(tmp_path / "on-path")))
    newest = debian / "16" / "bin"
    assert postgres_binaries(debian) == (newest / "initdb", newest / "pg_ctl")


def test_without_debian_folders_the_binaries_on_path_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debian = tmp_path / "absent"
    on_path = _install(tmp_path / "on-path")
    monkeypatch.setenv("PATH", str(on_path))
    assert postgres_binaries(debian) == (on_path / "initdb", on_path / "pg_ctl")


def test_without_postgresql_the_test_fails_naming_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debian = tmp_path / "absent"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="apt-get install postgresql"):
        postgres_binaries(debian)
