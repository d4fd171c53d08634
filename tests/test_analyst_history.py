"""Type-2 history of leads and digital assets, after real upstream changes."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import duckdb
import pytest

from ductwork.settings import HomeSettings
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer
from tests.helpers.sync import mutate, sync


@pytest.fixture
def changing_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, for a test that changes its data."""
    with object_store.sandbox(91) as handle:
        yield handle


def _rows(con: duckdb.DuckDBPyConnection, query: str, params: list | None = None) -> list[tuple]:
    return con.execute(query, params or []).fetchall()


def test_history_keeps_each_version_of_changed_leads_and_closes_deleted_assets(
    changing_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    sync(tmp_path, changing_upstream, object_store)
    warehouse = str(HomeSettings(home=tmp_path).warehouse_path)
    with duckdb.connect(warehouse, read_only=True) as con:
        # After the first sync: one current version per lead and asset, details filled in.
        assert (
            _rows(con, "SELECT count(*), count(DISTINCT id) FROM lead_history")[0]
            == (_rows(con, "SELECT count(*) FROM leads")[0][0],) * 2
        )
        assert _rows(con, "SELECT count(*) FROM lead_history WHERE detail_hash IS NULL") == [(0,)]
        live = _rows(con, "SELECT count(*) FROM digital_assets")[0][0]
        assert _rows(con, "SELECT count(*) FROM digital_asset_history WHERE is_current") == [
            (live,)
        ]

    changed = mutate(changing_upstream, leads_changed=60, assets_updated=20, assets_deleted=7)
    sync(tmp_path, changing_upstream, object_store)
    sync(tmp_path, changing_upstream, object_store, reconcile=True)

    items = changing_upstream.state.lead_items
    with duckdb.connect(warehouse, read_only=True) as con:
        for lead_id in changed["leads_changed"]:
            versions = _rows(
                con,
                "SELECT status, is_current, valid_from, valid_to FROM lead_history "
                "WHERE id = ? ORDER BY valid_from",
                [lead_id],
            )
            assert len(versions) >= 2, lead_id
            assert [v[1] for v in versions] == [False] * (len(versions) - 1) + [True]
            assert versions[-1][0] == items[lead_id]["Status"]  # the current status is upstream's
            assert versions[0][0] != versions[-1][0]  # the sandbox always changes the status
            for before, after in pairwise(versions):
                assert before[3] == after[2]  # versions abut: no gap, no overlap
            # "What was this lead's status on a date": the first version's, before the change.
            on_date = _rows(
                con,
                "SELECT status FROM lead_history WHERE id = ? AND valid_from <= ? "
                "AND (valid_to IS NULL OR valid_to > ?)",
                [lead_id, versions[0][2], versions[0][2]],
            )
            assert on_date == [(versions[0][0],)]
        unchanged = _rows(
            con,
            "SELECT count(*) FROM (SELECT id FROM lead_history GROUP BY id HAVING count(*) > 1)",
        )[0][0]
        assert unchanged == len(changed["leads_changed"])  # nobody else got a second version

        for asset_id in changed["assets_deleted"]:
            versions = _rows(
                con,
                "SELECT is_current, valid_to FROM digital_asset_history WHERE asset_id = ?",
                [asset_id],
            )
            assert versions and all(not current and end is not None for current, end in versions)
        for asset_id in set(changed["assets_updated"]) - set(changed["assets_deleted"]):
            current = _rows(
                con,
                "SELECT count(*) FILTER (is_current), count(*) FROM digital_asset_history "
                "WHERE asset_id = ?",
                [asset_id],
            )
            assert current == [(1, 2)], asset_id
        assert _rows(
            con,
            "SELECT count(*) FROM digital_assets AS d JOIN digital_asset_history AS h "
            "USING (asset_id) WHERE h.is_current AND d.deleted_at IS NOT NULL",
        ) == [(0,)]
