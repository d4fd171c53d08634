"""A warehouse written by an earlier release is brought to the current schema when the sync
opens it, without losing what it holds.

The first two open real DuckDB files through the core's ``prepare_connection``, as every
step of a sync does, with no Dagster run (unit tests of the schema step); the last runs
``ductwork sync`` as operators do, on a data folder's instance on disk.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb

from ductwork.store.bookmarks import read_bookmark, write_bookmark
from ductwork.store.loading import SCHEMA_BOOKMARK, _rebuild_keyed_bookkeeping, prepare_connection
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from warehouse_sql import schema_sql

BOOKKEEPING = ("digital_asset_walk_ids", "lead_detail_queue")
LEADS_WITH_DETAILS = "SELECT id FROM lead_details WHERE found ORDER BY id LIMIT 50"
DETAIL_SYNC_TIMES = "SELECT id, synced_at FROM lead_details WHERE list_contains(?, id)"


def constraints(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The kinds of constraint ``table`` carries."""
    rows = con.execute(
        "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = ?", [table]
    ).fetchall()
    return {kind for (kind,) in rows}


def earlier_release_warehouse(path: Path, queued: list[str], walked: list[str]) -> None:
    """Turn the warehouse at ``path`` (made if absent) into one as releases before the
    unindexed bookkeeping tables left it: both tables keyed, holding ``queued`` lead ids and
    ``walked`` asset ids, and the digest of the DDL alone applied (what a warehouse that ran the
    unindexed DDL before the rebuild existed holds)."""
    with duckdb.connect(str(path)) as con:
        prepare_connection(con)
        con.execute("DROP TABLE lead_detail_queue")
        con.execute("DROP TABLE digital_asset_walk_ids")
        con.execute("CREATE TABLE lead_detail_queue (id VARCHAR PRIMARY KEY)")
        con.execute("CREATE TABLE digital_asset_walk_ids (asset_id VARCHAR PRIMARY KEY)")
        con.execute("INSERT INTO lead_detail_queue SELECT unnest(?::VARCHAR[])", [queued])
        con.execute("INSERT INTO digital_asset_walk_ids SELECT unnest(?::VARCHAR[])", [walked])
        ddl_alone = hashlib.blake2b(schema_sql().encode(), digest_size=16).hexdigest()
        write_bookmark(con, SCHEMA_BOOKMARK, {"digest": ddl_alone})


def test_an_earlier_warehouse_loses_its_bookkeeping_keys_on_open_with_every_row_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "warehouse.duckdb"
    earlier_release_warehouse(
        path, [f"lead-{n}" for n in range(2500)], [f"DA-{n}" for n in range(1200)]
    )
    with duckdb.connect(str(path)) as con:
        before = {t: con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in BOOKKEEPING}
        assert all("PRIMARY KEY" in constraints(con, t) for t in BOOKKEEPING)

        prepare_connection(con)

        for table in BOOKKEEPING:
            assert constraints(con, table) == {"NOT NULL"}, table
            assert con.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() == before[table]
        leftovers = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '%_keyed'"
        ).fetchall()
        assert leftovers == []
        applied = read_bookmark(con, SCHEMA_BOOKMARK)
        # Checked once: the next open compares digests and rebuilds nothing.
        assert _rebuild_keyed_bookkeeping(con, schema_sql()) == []
    with duckdb.connect(str(path)) as con:
        prepare_connection(con)
        assert read_bookmark(con, SCHEMA_BOOKMARK) == applied
        assert con.execute("SELECT count(*) FROM lead_detail_queue").fetchone() == (2500,)


def test_a_new_warehouse_has_unkeyed_bookkeeping_and_needs_no_rebuild(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        prepare_connection(con)
        assert all(constraints(con, table) == {"NOT NULL"} for table in BOOKKEEPING)
        assert _rebuild_keyed_bookkeeping(con, schema_sql()) == []


def test_ductwork_sync_on_an_earlier_warehouse_drops_the_keys_and_fetches_what_was_queued(
    synced_home: Path, upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    """``ductwork sync`` as operators run it, on a copy of a synced data folder whose warehouse
    is turned back into an earlier release's with fifty leads' details still queued: the run
    succeeds, the keys are gone, and those fifty details are fetched again (the queue's rows
    survived the rebuild)."""
    home = tmp_path / "home"
    shutil.copytree(synced_home, home)
    warehouse = home / "warehouse.duckdb"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        queued = [row[0] for row in con.execute(LEADS_WITH_DETAILS).fetchall()]
        synced_before = dict(con.execute(DETAIL_SYNC_TIMES, [queued]).fetchall())
    assert len(queued) == 50
    earlier_release_warehouse(warehouse, queued, [])

    done = ductwork("sync", env=sync_env(home, upstream, object_store, UPSTREAM_KEY))

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        "rebuilt digital_asset_walk_ids, lead_detail_queue without the primary key" in done.stderr
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert all(constraints(con, table) == {"NOT NULL"} for table in BOOKKEEPING)
        assert con.execute("SELECT count(*) FROM lead_detail_queue").fetchone() == (0,)
        synced_after = dict(con.execute(DETAIL_SYNC_TIMES, [queued]).fetchall())
    assert all(synced_after[i] > synced_before[i] for i in queued), (synced_before, synced_after)
