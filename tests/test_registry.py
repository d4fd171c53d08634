"""The registry of streams is the one list: every registered stream has what the rest of the
tree derives from it (its tables and their comments, a route in the read API, a freshness policy
in Dagster, a sandbox handler), and nothing else lists the streams."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from ductwork.history.recording import as_of_macro
from ductwork.streams.model import Stream
from ductwork.streams.registry import STREAMS, all_steps
from ductwork.warehouse.schema import comment_sql, schema_sql
from ductwork.warehouse.table_docs import table_docs
from sandbox.app import route
from serve.app import ROUTERS
from warehouse_sql import has_stream_file, stream_section

ROOT = Path(__file__).parent.parent
NAMES = [stream.name for stream in STREAMS]


@pytest.fixture(scope="module")
def warehouse() -> duckdb.DuckDBPyConnection:
    """An empty warehouse with every table of the schema, and every comment."""
    con = duckdb.connect()
    con.execute(schema_sql())
    for comments in comment_sql():
        con.execute(comments)
    return con


def test_stream_names_and_asset_keys_are_unique() -> None:
    assert len(set(NAMES)) == len(NAMES)
    assets = [step.asset for step in all_steps()]
    assert len(set(assets)) == len(assets)


@pytest.mark.parametrize("stream", STREAMS, ids=NAMES)
def test_every_stream_has_its_sql_file_and_its_tables_keyed_as_declared(
    stream: Stream, warehouse: duckdb.DuckDBPyConnection
) -> None:
    """A step's table has the registry's key as its primary key, or no primary key and its
    key's columns NOT NULL (its blocking check then counts repeated keys)."""
    assert has_stream_file(stream.sql), f"warehouse_sql/streams/{stream.sql}.sql is missing"
    assert stream_section(stream.sql, "tables"), stream.name
    assert as_of_macro(stream.sql), stream.name  # the feed and the past read the stream by it
    keys = dict(
        warehouse.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    )
    for step in stream.steps:
        if step.table.name in keys:
            assert tuple(keys[step.table.name]) == step.table.key, step.asset
            continue
        nullable = warehouse.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND is_nullable",
            [step.table.name],
        ).fetchall()
        assert not set(step.table.key) & {name for (name,) in nullable}, step.asset


@pytest.mark.parametrize("stream", STREAMS, ids=NAMES)
def test_every_table_of_a_stream_is_commented_column_by_column(
    stream: Stream, warehouse: duckdb.DuckDBPyConnection
) -> None:
    created = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", stream_section(stream.sql, "tables"))
    docs = table_docs()
    for table in created:
        assert docs[table].comment, table
        columns = warehouse.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ?", [table]
        ).fetchall()
        assert columns and all(comment for _, comment in columns), (table, columns)


@pytest.mark.parametrize("stream", STREAMS, ids=NAMES)
def test_every_stream_is_routed_in_the_read_api_and_in_the_sandbox(stream: Stream) -> None:
    router = ROUTERS[stream.family]
    served = {getattr(r, "path", None) for r in router.routes}
    assert stream.path in served, f"the read API has no route for {stream.path}"
    assert route(stream.path) is not None, f"the sandbox does not answer {stream.path}"


def test_every_step_has_a_freshness_policy_from_its_cadence() -> None:
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    for stream in STREAMS:
        for asset in stream.assets:
            policy = graph.get(dg.AssetKey(asset)).freshness_policy
            assert policy is not None, asset
            assert policy.fail_window.to_timedelta() == stream.cadence.fail_after, asset


def test_no_stream_name_or_asset_key_is_written_out_in_pipelines() -> None:
    """``pipelines/`` derives every stream from the registry: a name written there by hand
    would be a list the registry no longer governs."""
    words = {*NAMES, *(step.asset for step in all_steps())}
    found = []
    for source in sorted((ROOT / "pipelines").rglob("*.py")):
        text = source.read_text(encoding="utf-8")
        for word in words:
            if re.search(rf"""["'`]{re.escape(word)}["'`]""", text):
                found.append(f"{source.relative_to(ROOT)}: {word}")
    assert not found, found
