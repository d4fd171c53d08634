"""The ``ductwork`` command as an operator uses it."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import duckdb

from ductwork import snapshots
from ductwork.streams.registry import INDOOR_MODELS, STREAMS
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env


def test_sync_command_records_its_run_in_the_instance_and_exits_zero(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, upstream, object_store, UPSTREAM_KEY)
    done = ductwork("sync", "--select", "group:catalog", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    os.environ["DAGSTER_HOME"] = str(tmp_path / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            runs = instance.get_runs()
    finally:
        del os.environ["DAGSTER_HOME"]
    assert [run.job_name for run in runs] == ["sync_all"]
    assert runs[0].status == dg.DagsterRunStatus.SUCCESS
    assert (tmp_path / "snapshots" / "CURRENT").exists()

    query = ductwork("sql", "SELECT count(*) AS n FROM units", "--format", "csv", env=env)
    assert query.returncode == 0
    assert int(query.stdout.splitlines()[1]) > 0


def test_sync_with_a_wrong_key_exits_one_with_a_clear_message_and_no_secret(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    wrong = "wrong-key-that-must-not-be-printed"
    env = sync_env(tmp_path, upstream, object_store, wrong)
    done = ductwork("sync", "--select", "catalog_items", env=env)
    assert done.returncode == 1
    output = done.stdout + done.stderr
    assert "rejected the API key (401)" in output
    assert wrong not in output


def test_sync_without_an_upstream_url_is_a_one_line_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTWORK_")}
    env["DUCTWORK_HOME"] = str(tmp_path)
    done = ductwork("sync", env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ductwork: DUCTWORK_UPSTREAM_URL is not set; DUCTWORK_UPSTREAM_API_KEY is not set"
    ]


def test_keys_create_prints_the_key_last_and_stores_only_its_hash(tmp_path: Path) -> None:
    env = {**os.environ, "DUCTWORK_HOME": str(tmp_path)}
    done = ductwork("keys", "create", "analyst", "--scope", "catalog", env=env, timeout=120)
    assert done.returncode == 0
    key = done.stdout.strip().splitlines()[-1]
    assert len(key) > 40
    assert key not in (tmp_path / "api-keys.json").read_text()
    listed = ductwork("keys", "list", env=env, timeout=120)
    assert "analyst\tcatalog" in listed.stdout


def test_keys_create_grants_a_stream_of_the_registry_and_refuses_an_unknown_one_in_one_line(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "DUCTWORK_HOME": str(tmp_path)}
    feed = f"stream:{INDOOR_MODELS.name}"
    done = ductwork("keys", "create", "models-feed", "--scope", feed, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    stored = (tmp_path / "api-keys.json").read_bytes()
    refused = ductwork(
        "keys", "create", "typo", "--scope", "stream:indoor-model", "--scope", "crm",
        env=env, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("ductwork: keys create: unknown scope(s) 'stream:indoor-model'; ")
    assert all(stream.name in line for stream in STREAMS)  # the registry's names, to pick from
    assert (tmp_path / "api-keys.json").read_bytes() == stored  # no key made
    listed = ductwork("keys", "list", env=env, timeout=120)
    assert [row.split("\t")[:2] for row in listed.stdout.splitlines()] == [["models-feed", feed]]


def test_sql_writes_parquet_to_the_output_file_and_refuses_parquet_without_one(
    synced_home: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "DUCTWORK_HOME": str(synced_home)}
    out = tmp_path / "units.parquet"
    query = "SELECT sku, unit_type FROM units ORDER BY sku"
    done = ductwork("sql", query, "--format", "parquet", "--output", str(out), env=env)
    assert done.returncode == 0, done.stderr
    with duckdb.connect() as con:
        written = con.execute("SELECT sku, unit_type FROM read_parquet(?)", [str(out)]).fetchall()
        _, snapshot_con = snapshots.open_current(synced_home / "snapshots")
        with snapshot_con:
            expected = snapshot_con.execute(query).fetchall()
    assert written == expected and len(written) > 0
    refused = ductwork("sql", query, "--format", "parquet", env=env)
    assert refused.returncode == 2
    assert "--output" in refused.stderr


def test_every_subcommand_runs_by_its_own_module_and_declares_what_it_writes() -> None:
    """Each subcommand's module adds its parser with the function that runs it: a leaf
    subcommand without one fails only when someone runs it. The commands that write the data
    folder (so that it is first brought to the file-mode rule) and those that run a job in
    the process are the ones that do."""
    import argparse

    from pipelines import commands

    def leaves(
        parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
    ) -> dict[tuple[str, ...], argparse.ArgumentParser]:
        found = {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found |= leaves(sub, (*path, name))
        return found or {path: parser}

    found = leaves(commands.parser("test"))
    assert len(found) > 15
    # The sandbox's arguments go to its own parser before this one reads them.
    runs = {path: parser.get_default("run") for path, parser in found.items()}
    assert [path for path, run in runs.items() if not callable(run)] == [("sandbox",)]
    writers = {
        path[0] for path, parser in found.items() if parser.get_default("writes_data_folder")
    }
    assert writers == {"sync", "run-job", "dev", "demo", "subscriptions", "forget"}
    subscriptions = [parser for path, parser in found.items() if path[0] == "subscriptions"]
    assert len(subscriptions) == 4
    assert all(parser.get_default("writes_data_folder") for parser in subscriptions)
    jobs = {path[0] for path, parser in found.items() if parser.get_default("runs_a_job")}
    assert jobs == {"sync", "run-job", "forget"}
