"""A data folder with a history of several publishes, made as the publish step makes them."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb

from ductwork import snapshots
from ductwork.settings import HomeSettings


def home_with_publishes(synced_home: Path, home: Path, more: int) -> list[str]:
    """Copy the synced folder to ``home`` and publish ``more`` times, each publish changing a
    few digital assets' records; every version its history keeps, oldest first (the last is
    current). Every snapshot file stays in the folder."""
    shutil.copytree(synced_home, home)
    settings = HomeSettings(home=home)
    with duckdb.connect(str(settings.warehouse_path)) as con:
        for round_ in range(more):
            con.execute(
                "UPDATE digital_assets SET record = json_object('assetId', asset_id, 'round', ?)"
                " WHERE asset_id IN (SELECT asset_id FROM digital_assets ORDER BY asset_id"
                " LIMIT 5 OFFSET ?)",
                [round_, 5 * round_],
            )
            snapshots.publish(con, settings.snapshots_dir, timedelta(days=90))
    files = sorted(settings.snapshots_dir.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}"))
    return [snapshots.version_of(path.name) for path in files]


def snapshot_file(home: Path, version: str) -> Path:
    """The file of the snapshot ``version`` in the data folder ``home``."""
    name = f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    return HomeSettings(home=home).snapshots_dir / name
