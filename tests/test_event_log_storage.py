"""The event log of a run's own process: its databases stay open, its rows are Dagster's."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from pipelines.event_log import HeldSqliteEventLogStorage
from pipelines.instance import prepare_dagster_home, run_instance


@dg.asset
def counted() -> dg.MaterializeResult:
    """A tiny asset with metadata, to give the event log something to store."""
    return dg.MaterializeResult(metadata={"rows": 3})


@dg.asset_check(asset=counted)
def counted_has_rows() -> dg.AssetCheckResult:
    """A check, whose evaluation is mirrored to the index database like any asset event."""
    return dg.AssetCheckResult(passed=True)


@contextmanager
def counting_connections() -> Iterator[list[str]]:
    """The file of every SQLite connection SQLAlchemy opens inside the block."""
    opened: list[str] = []

    def on_connect(dbapi_connection: sqlite3.Connection, record: object) -> None:
        opened.append(dbapi_connection.execute("PRAGMA database_list").fetchone()[2])

    sqlalchemy.event.listen(sqlalchemy.pool.Pool, "connect", on_connect)
    try:
        yield opened
    finally:
        sqlalchemy.event.remove(sqlalchemy.pool.Pool, "connect", on_connect)


def _run_twice(instance: dg.DagsterInstance) -> None:
    job = dg.define_asset_job("counted_job").resolve(
        asset_graph=dg.Definitions(
            assets=[counted], asset_checks=[counted_has_rows]
        ).resolve_asset_graph()
    )
    for _ in range(2):
        assert job.execute_in_process(instance=instance).success


def _dagsters_own(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(home))


@pytest.mark.parametrize(
    ("open_instance", "held"),
    [(run_instance, True), (_dagsters_own, False)],
    ids=["held", "dagster"],
)
def test_held_event_log_opens_each_database_once_for_a_whole_run(
    open_instance: Callable[[Path], dg.DagsterInstance], held: bool, tmp_path: Path
) -> None:
    """Two runs store some forty events; the held log opens the index and each run's database
    once (Dagster's own opens a connection per event or more, which the second case shows)."""
    home = prepare_dagster_home(tmp_path / "dagster")
    with open_instance(home) as instance, counting_connections() as opened:
        _run_twice(instance)
        stored = sum(len(instance.all_logs(run.run_id)) for run in instance.get_runs())
    assert stored > 30
    event_log_opens = [path for path in opened if "/history/runs/" in path]
    if held:
        # Creating each run's database takes two; the index was opened before the runs, and is
        # asked once for each of two tables Dagster checks for.
        assert len(event_log_opens) <= 6, event_log_opens
    else:
        assert len(event_log_opens) > stored


def test_a_run_instance_writes_what_dagsters_own_storage_reads(tmp_path: Path) -> None:
    """Runs through ``run_instance`` land in the files Dagster's default instance reads: the
    run's events, the asset's materialisations and the check's evaluations."""
    home = prepare_dagster_home(tmp_path / "dagster")
    with run_instance(home) as instance:
        assert isinstance(instance.event_log_storage, HeldSqliteEventLogStorage)
        _run_twice(instance)
        run_ids = {run.run_id for run in instance.get_runs()}
    with dg.DagsterInstance.from_config(str(home)) as plain:
        assert type(plain.event_log_storage) is SqliteEventLogStorage
        assert {run.run_id for run in plain.get_runs()} == run_ids
        materialized = plain.fetch_materializations(counted.key, limit=10).records
        assert {record.run_id for record in materialized} == run_ids
        assert materialized[0].asset_materialization.metadata["rows"].value == 3
        check = dg.AssetCheckKey(counted.key, "counted_has_rows")
        executions = plain.event_log_storage.get_asset_check_execution_history(check, limit=10)
        assert {execution.run_id for execution in executions} == run_ids
        for run_id in run_ids:
            assert plain.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS


def test_a_storage_named_in_dagster_yaml_is_used_as_configured(tmp_path: Path) -> None:
    """An operator's own storage in dagster.yaml (Postgres, or SQLite spelled out) is kept."""
    home = prepare_dagster_home(tmp_path / "dagster")
    config = home / "dagster.yaml"
    base = tmp_path / "elsewhere"
    config.write_text(
        config.read_text(encoding="utf-8") + f"storage:\n  sqlite:\n    base_dir: {base}\n",
        encoding="utf-8",
    )
    with run_instance(home) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
        _run_twice(instance)
    assert list((base / "history" / "runs").glob("*.db"))
    assert not (home / "history").exists()


def test_the_run_event_log_commits_to_its_write_ahead_log_without_an_fsync(
    tmp_path: Path,
) -> None:
    """Every database of the held log is in WAL mode at ``synchronous=NORMAL``: a commit no
    longer waits for the disk (SQLite's default, FULL, fsyncs the log on every event)."""
    home = prepare_dagster_home(tmp_path / "dagster")
    with run_instance(home) as instance:
        _run_twice(instance)
        storage = instance.event_log_storage
        connections = [storage.index_connection()]
        connections += [storage.run_connection(run.run_id) for run in instance.get_runs()]
        for connection in connections:
            with connection as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


KILLED_AFTER_A_RUN = """
import os, signal, sys
sys.path[:0] = [{tests!r}, {root!r}]
from pathlib import Path
from test_event_log_storage import _run_twice
from pipelines.instance import prepare_dagster_home, run_instance
instance = run_instance(prepare_dagster_home(Path({home!r})))
_run_twice(instance)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_events_committed_before_the_process_is_killed_are_all_kept(tmp_path: Path) -> None:
    """A process killed right after its runs, without closing anything, leaves every event it
    committed readable by Dagster's own storage: both runs ended in success, with their
    materialisations."""
    import subprocess
    import sys

    home = tmp_path / "dagster"
    script = KILLED_AFTER_A_RUN.format(
        tests=str(Path(__file__).parent),
        root=str(Path(__file__).parent.parent),
        home=str(home),
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    with dg.DagsterInstance.from_config(str(home)) as plain:
        runs = plain.get_runs()
        assert len(runs) == 2
        assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
        materialized = plain.fetch_materializations(counted.key, limit=10).records
        assert {record.run_id for record in materialized} == {run.run_id for run in runs}
