"""The exports the mirror knows of: ``ductwork export`` as a process writes a manifest naming
the snapshot it came from and notes each export in the data folder's registry; an erasure
asks ``exports_holding`` which known exports still hold a key, answered by DuckDB over the
exports' Parquet files.

One data folder synced (the lead steps, against a tiny sandbox), exported twice; the first
export's folder is then deleted by hand.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from ductwork import snapshots
from ductwork.erasure.exports import exports_holding, known_exports
from ductwork.settings import HomeSettings
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env

pytestmark = pytest.mark.timeout(600)

SEED = 53
LEAD_STEPS = ("--select", "crm_leads", "--select", "crm_lead_details")


@dataclass(frozen=True)
class Exported:
    """The data folder, its two exports (the first one deleted since) and a lead's key."""

    home: Path
    first: Path
    second: Path
    lead: str


@pytest.fixture(scope="module")
def exported(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exported]:
    home = tmp_path_factory.mktemp("export-registry")
    out = tmp_path_factory.mktemp("exports")
    with object_store.sandbox(SEED, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        done = ductwork("sync", *LEAD_STEPS, env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        first, second = out / "first", out / "second"
        for target in (first, second):
            done = ductwork("export", "--to", str(target), env=env)
            assert done.returncode == 0, done.stderr[-3000:]
    warehouse = HomeSettings(home=home).warehouse_path
    with duckdb.connect(str(warehouse), read_only=True) as con:
        lead = con.execute("SELECT id FROM leads ORDER BY id LIMIT 1").fetchall()[0][0]
    shutil.rmtree(first)
    yield Exported(home, first, second, lead)


def test_each_export_s_manifest_names_the_snapshot_it_came_from_and_every_file_written(
    exported: Exported,
) -> None:
    manifest = json.loads((exported.second / "manifest.json").read_text(encoding="utf-8"))
    current = snapshots.current(HomeSettings(home=exported.home).snapshots_dir)
    assert current is not None
    assert manifest["snapshot_version"] == current.version
    assert manifest["exported_at"].endswith("+00:00")
    assert manifest["files"] == [table["path"] for table in manifest["tables"]]
    assert all((exported.second / name).is_file() for name in manifest["files"])


def test_the_registry_holds_one_line_per_export_private_to_its_owner(exported: Exported) -> None:
    settings = HomeSettings(home=exported.home)
    known = known_exports(settings)
    current = snapshots.current(settings.snapshots_dir)
    assert current is not None
    assert [k.location for k in known] == [str(exported.first), str(exported.second)]
    assert {k.snapshot_version for k in known} == {current.version}
    assert stat.S_IMODE(settings.exports_registry.stat().st_mode) == 0o600


def test_exports_holding_names_the_existing_exports_that_hold_the_key_and_no_other(
    exported: Exported,
) -> None:
    settings = HomeSettings(home=exported.home)
    assert exports_holding(settings, "leads", [exported.lead]) == [exported.second]
    assert exports_holding(settings, "leads", ["no-such-lead", exported.lead]) == [exported.second]
    assert exports_holding(settings, "leads", ["no-such-lead"]) == []
    assert exports_holding(settings, "leads", []) == []
    # A contractors' key is looked for in the contractors' files, which this export lacks.
    assert exports_holding(settings, "contractors", [exported.lead]) == []
