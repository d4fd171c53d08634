"""Forgetting one person on a data folder with history: ``ductwork forget`` as a whole process.

On the data folder the memory part left (a full sync, then syncs each after 1 % of the digital
assets and leads changed), the lead with the most changes in the history (of those whose email
is theirs alone) is deleted upstream, ``ductwork sync`` records the deletion, and ``ductwork
forget leads ID --reason ...`` erases it from the warehouse, the snapshots and the store; its
wall time is the figure (target: under a minute at medium). Afterwards, no snapshot file in the
data folder may hold the lead's email.

    python -m bench.forget --scale medium --syncs 30   # alone: sandbox, full sync, syncs, forget
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from bench.memory import BUCKET, sync
from bench.suite import (
    KEY,
    LAUNCH,
    ROOT,
    Upstream,
    measured,
    prepare_children_environment,
    start_object_store,
    upstream,
)
from ductwork.settings import HomeSettings, upstream_environment
from pipelines.processes import ProcessGroup

TARGET_S = 60.0


@dataclass
class ForgetFailed:
    """The forget could not be measured: the error that stopped it (its verdict is missed)."""

    error: str


@dataclass
class ForgetFindings:
    """The lead forgotten (its number of versions), the sync that saw it deleted and the
    forget's seconds, and the snapshot files that still held its email afterwards."""

    versions: int
    sync_s: float
    forget_s: float
    files_holding: int


def most_changed_lead(home: Path) -> tuple[str, int, str]:
    """The lead with the most changes in the feed's log among those whose email no other lead
    shares (so that a copy of it is a copy of this lead): its id, how many, its email."""
    warehouse = str(HomeSettings(home=home).warehouse_path)
    with duckdb.connect(warehouse, read_only=True) as con:
        found = con.execute(
            "WITH own AS (SELECT id, email FROM lead_details WHERE email IS NOT NULL "
            "QUALIFY count(*) OVER (PARTITION BY email) = 1) "
            "SELECT key, count(*), any_value(own.email) FROM history.feed_log "
            "JOIN own ON own.id = feed_log.key WHERE stream = 'leads' "
            "GROUP BY key ORDER BY count(*) DESC, key LIMIT 1"
        ).fetchone()
    assert found is not None, "the history holds no lead with an email of its own"
    return str(found[0]), int(found[1]), str(found[2])


def files_holding(home: Path, text: str) -> int:
    """The snapshot files of the data folder holding ``text`` in any text column of any table
    (DuckDB itself reads them: a byte search of a compressed file proves nothing)."""
    holding = 0
    for path in sorted(HomeSettings(home=home).snapshots_dir.glob("snapshot-*.duckdb")):
        with duckdb.connect(str(path), read_only=True) as con:
            columns = con.execute(
                "SELECT schema_name, table_name, column_name FROM duckdb_columns() "
                "WHERE data_type = 'VARCHAR' AND NOT internal"
            ).fetchall()
            for schema, table, column in columns:
                hit = con.execute(
                    f'SELECT 1 FROM "{schema}"."{table}" WHERE contains("{column}", ?) LIMIT 1',
                    [text],
                ).fetchone()
                if hit is not None:
                    holding += 1
                    break
    return holding


def measure(up: Upstream, home: Path, work: Path) -> ForgetFindings:
    """Delete the most changed lead upstream, sync, then time ``ductwork forget`` of it."""
    lead, versions, email = most_changed_lead(home)
    assert up.admin.delete_leads([lead]) == [lead]
    env = {"DUCTWORK_HOME": str(home), **upstream_environment(up.url, KEY, up.s3_url, BUCKET)}
    log = work / "children.log"
    sync_s = measured([*LAUNCH, "ductwork", "sync", "--reconcile"], log, env, ROOT).seconds
    command = [*LAUNCH, "ductwork", "forget", "leads", lead, "--reason", "benchmark request"]
    forget_s = measured(command, log, env, ROOT).seconds
    return ForgetFindings(versions, sync_s, forget_s, files_holding(home, email))


def measure_or_failure(up: Upstream, home: Path, work: Path) -> ForgetFindings | ForgetFailed:
    """``measure``, or what stopped it: the suite goes on to its other parts either way."""
    try:
        return measure(up, home, work)
    except Exception as error:  # reported as a missed target, with its message
        return ForgetFailed(f"{type(error).__name__}: {error}"[:500])


def report(
    found: ForgetFindings | ForgetFailed, scale: str
) -> tuple[list[str], tuple[str, str, str, bool]]:
    """The section's lines, and its summary row (figure, value, target, met)."""
    figure = f"`ductwork forget` of one lead ({scale})"
    target = f"< {TARGET_S:.0f} s, no snapshot left holding it"
    if isinstance(found, ForgetFailed):
        return [f"`ductwork forget` could not be measured: {found.error}", ""], (
            figure, "failed", target, False,
        )  # fmt: skip
    met = found.forget_s < TARGET_S and found.files_holding == 0
    lines = [
        f"`ductwork forget leads ID` as a whole process at `{scale}`, on the memory part's data "
        f"folder: the lead with the most changes in the history among those with an email of "
        f"their own ({found.versions}), deleted upstream and seen deleted by "
        f"`ductwork sync --reconcile` ({found.sync_s:.1f} s), "
        f"then forgotten in **{found.forget_s:.1f} s** (target under {TARGET_S:.0f} s). "
        f"Snapshot files still holding its email afterwards (searched with DuckDB): "
        f"{found.files_holding}.",
        "",
    ]
    return lines, (figure, f"{found.forget_s:.1f} s", target, met)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--syncs", type=int, default=30)
    options = parser.parse_args()
    prepare_children_environment()  # moto's credentials, as the suite gives its children
    with tempfile.TemporaryDirectory(prefix="ductwork-forget-") as folder, ProcessGroup() as group:
        work = Path(folder)
        s3_url = start_object_store(group)
        with upstream(options.scale, group, s3_url) as up:
            home = work / "home"
            sync(up, home, work / "children.log")
            stats = up.stats()
            counts = {
                "assets_updated": stats["assets"] // 100,
                "leads_changed": stats["leads"] // 100,
            }
            for _ in range(options.syncs):
                up.mutate(counts)
                sync(up, home, work / "children.log")
            found = measure(up, home, work)
    lines, _ = report(found, options.scale)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
