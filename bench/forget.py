"""Forgetting one person on a data folder with history: ``ductwork forget`` as a whole process.

On the data folder the memory part left (a full sync, then syncs each after 1 % of the digital
assets and leads changed), the history is first brought to 90 days' worth at a publish a day
(``HISTORY_PUBLISHES``: more syncs, each after 1 % of the leads changed; the history's days are
counted in publishes, as the bench cannot wait for days). Then the lead with the most changes in
the history (of those whose email is theirs alone) is deleted upstream, ``ductwork sync``
records the deletion, and ``ductwork forget leads ID --reason ...`` erases it from the
warehouse, the snapshots and the store; its wall time is the figure (target: under a minute at
medium). Afterwards, no snapshot file in the data folder may hold the lead's email.

    python -m bench.forget --scale medium --syncs 30   # alone: sandbox, full sync, syncs, forget
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from bench.launching import LAUNCH, ROOT, prepare_children_environment
from bench.measuring import measured
from bench.memory import BUCKET, sync
from bench.upstreams import KEY, Upstream, start_object_store, upstream
from ductwork.settings import HomeSettings, upstream_environment
from pipelines.processes import ProcessGroup

TARGET_S = 60.0
# The history the forget works on: 90 days of the default retention, at one publish a day.
HISTORY_PUBLISHES = 90


@dataclass
class ForgetFailed:
    """The forget could not be measured: the error that stopped it (its verdict is missed)."""

    error: str


@dataclass
class ForgetFindings:
    """The lead forgotten (its number of versions), the sync that saw it deleted and the
    forget's seconds, and the snapshot files that still held its email afterwards; the
    publishes the history held, and how many syncs (and seconds) brought it there."""

    versions: int
    sync_s: float
    forget_s: float
    files_holding: int
    publishes: int = 0
    added_syncs: int = 0
    added_s: float = 0.0


def publishes_kept(home: Path) -> int:
    """The publishes the data folder's history holds."""
    warehouse = str(HomeSettings(home=home).warehouse_path)
    with duckdb.connect(warehouse, read_only=True) as con:
        found = con.execute("SELECT count(*) FROM history.publishes").fetchone()
    return int(found[0]) if found else 0


def fill_history(up: Upstream, home: Path, log: Path, publishes: int) -> tuple[int, float]:
    """Syncs, each after 1 % of the leads changed, until the history holds ``publishes``
    publishes; how many syncs ran, and their seconds."""
    changed = {"leads_changed": max(1, up.stats()["leads"] // 100)}
    syncs, seconds = 0, 0.0
    while publishes_kept(home) < publishes:
        up.mutate(changed)
        seconds += sync(up, home, log)
        syncs += 1
        if syncs % 10 == 0:
            print(f"[forget] history: {publishes_kept(home)} publishes", flush=True)
        assert syncs <= publishes, "the syncs do not publish: the history cannot grow"
    return syncs, seconds


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


def measure(
    up: Upstream, home: Path, work: Path, publishes: int = HISTORY_PUBLISHES
) -> ForgetFindings:
    """Bring the history to ``publishes``, delete the most changed lead upstream, sync, then
    time ``ductwork forget`` of it."""
    log = work / "children.log"
    added, added_s = fill_history(up, home, log, publishes)
    publishes = publishes_kept(home)
    lead, versions, email = most_changed_lead(home)
    assert up.admin.delete_leads([lead]) == [lead]
    env = {"DUCTWORK_HOME": str(home), **upstream_environment(up.url, KEY, up.s3_url, BUCKET)}
    sync_s = measured([*LAUNCH, "ductwork", "sync", "--reconcile"], log, env, ROOT).seconds
    command = [*LAUNCH, "ductwork", "forget", "leads", lead, "--reason", "benchmark request"]
    forget_s = measured(command, log, env, ROOT).seconds
    holding = files_holding(home, email)
    return ForgetFindings(versions, sync_s, forget_s, holding, publishes, added, added_s)


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
    figure = f"`ductwork forget` of one lead, {HISTORY_PUBLISHES} days of history ({scale})"
    target = f"< {TARGET_S:.0f} s, no snapshot left holding it"
    if isinstance(found, ForgetFailed):
        return [f"`ductwork forget` could not be measured: {found.error}", ""], (
            figure, "failed", target, False,
        )  # fmt: skip
    met = found.forget_s < TARGET_S and found.files_holding == 0
    lines = [
        f"`ductwork forget leads ID` as a whole process at `{scale}`, on the memory part's data "
        f"folder, its history brought to {found.publishes} publishes ({found.publishes} days "
        f"at a publish a day) by {found.added_syncs} more syncs, each after 1 % of the leads "
        f"changed ({found.added_s:.0f} s in all): "
        f"the lead with the most changes in the history among those with an email of "
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
    parser.add_argument(
        "--publishes", type=int, default=HISTORY_PUBLISHES, help="the history before the forget"
    )
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
            found = measure(up, home, work, options.publishes)
    lines, _ = report(found, options.scale)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
