"""Every check that guards the published snapshot, as rules made from the registry: each
step's keys and size, its reader's guards and its warnings (``stream_rules``), gathered into a
few check steps (``STREAM_CHECKS``).

The key checks read the warehouse; the others read the run metadata each asset recorded (row
count, cursor, reported total) from the Dagster instance, and their verdicts are plain
functions of that metadata.
"""

from collections.abc import Callable
from typing import Any

import dagster as dg
import duckdb

from assets.check_steps import AssetRule, CheckInputs, CheckRule, Metadata, grouped_checks
from assets.resources import DataHome
from ductwork import snapshots
from ductwork.streams.model import Table, Warning
from ductwork.streams.registry import STREAMS, all_steps
from ductwork.upstream.timestamps import canonical_or_received
from ductwork.warehouse.loading import count_rows, key_faults
from warehouse_sql import stream_section


def keys_unique_and_present(asset: dg.AssetKey, table: Table) -> AssetRule:
    """A blocking check: the rows of ``table`` are keyed by the columns the registry names,
    and the table is not empty when the current published snapshot has rows there (a sync
    that emptied a table is far likelier a fault than a real change, and must not reach the
    read API).

    A table whose primary key is exactly those columns is trusted (DuckDB refuses NULL and
    duplicate keys itself); a table with no primary key (the large ones: DuckDB holds a key's
    index in memory) has its NULL and repeated keys counted here, unless nothing was written
    to the warehouse since the current snapshot was published; a table keyed otherwise fails."""
    key = ", ".join(table.key)

    def verdict(inputs: CheckInputs) -> dg.AssetCheckResult:
        enforced = inputs.warehouse.primary_keys().get(table.name)
        rows = count_rows(inputs.connection(), table)
        metadata: dict[str, Any] = {"rows": rows}
        if enforced == frozenset(table.key):
            keyed = True
            metadata["keys_enforced_by"] = f"PRIMARY KEY ({key})"
        elif enforced is None:
            keyed = _keys_counted(inputs, table, metadata)
        else:
            keyed = False
            metadata["keys_enforced_by"] = "nothing: the table's primary key is not these columns"
        emptied = False
        if rows == 0:  # opening the published snapshot is slow: only an empty table asks
            published = _published_rows(inputs.data_home, table)
            emptied = bool(published)
            metadata["rows_in_published_snapshot"] = published if published is not None else -1
        return dg.AssetCheckResult(passed=keyed and not emptied, metadata=metadata)

    return AssetRule(
        asset,
        CheckRule(
            name=f"{asset.path[-1]}_keys_unique_and_present",
            description=f"Every row of {table.name} has a non-NULL, unique ({key}); not emptied "
            "since the last publish.",
            verdict=verdict,
        ),
    )


def _keys_counted(inputs: CheckInputs, table: Table, metadata: dict[str, Any]) -> bool:
    """Whether ``table`` (no primary key) has no NULL or repeated key: counted, unless nothing
    was written to the warehouse since a publish (whose checks passed) made the current
    snapshot."""
    if snapshots.stamped_as_current(inputs.connection(), inputs.data_home.snapshots_dir):
        metadata["keys_enforced_by"] = "the current snapshot's check (nothing written since)"
        return True
    faults = key_faults(inputs.connection(), table)
    metadata["keys_enforced_by"] = "this check (no primary key)"
    metadata["null_keys"] = faults.null_keys
    metadata["repeated_keys"] = faults.repeated_keys
    return faults.null_keys == faults.repeated_keys == 0


def _published_rows(data_home: DataHome, table: Table) -> int | None:
    """Rows the table (or its slice) has in the current snapshot; None before the first
    publish (or when that snapshot predates the table)."""
    try:
        _, con = snapshots.open_current(data_home.snapshots_dir)
    except FileNotFoundError:
        return None
    with con:
        try:
            return count_rows(con, table)
        except duckdb.CatalogException:
            return None


def warns(asset: dg.AssetKey, stream_sql: str, warning: Warning) -> AssetRule:
    """A non-blocking check: the stream's statement lists no offending value (the first
    twenty it lists are named in the metadata)."""

    def verdict(inputs: CheckInputs) -> dg.AssetCheckResult:
        statement = stream_section(stream_sql, warning.statement)
        found = [row[0] for row in inputs.connection().execute(statement).fetchall()]
        return dg.AssetCheckResult(
            passed=not found,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"found": len(found), "examples": ", ".join(map(str, found[:20]))},
        )

    return AssetRule(
        asset,
        CheckRule(
            name=warning.name,
            description=warning.description,
            verdict=verdict,
            blocking=False,
            additional_deps=warning.after,
        ),
    )


# A table may lose at most this fraction of its rows in one run, unless the run reconciles.
SHRINK_LIMIT = 0.2


def shrink_verdict(current: Metadata | None, previous: Metadata | None) -> dg.AssetCheckResult:
    """Fail when the row count fell by more than SHRINK_LIMIT outside a reconciliation."""
    rows = int((current or {}).get("dagster/row_count", 0))
    before = int((previous or {}).get("dagster/row_count", 0))
    reconciling = (current or {}).get("mode") == "reconcile"
    lost = max(before - rows, 0)
    shrunk = before > 0 and lost / before > SHRINK_LIMIT
    return dg.AssetCheckResult(
        passed=reconciling or not shrunk,
        metadata={
            "rows": rows,
            "rows_before": before,
            "rows_lost": lost,
            "shrink_limit": SHRINK_LIMIT,
            "reconciliation": reconciling,
        },
    )


def lead_cursor(metadata: Metadata | None) -> tuple[str, str] | None:
    """The (CreatedDate, Id) cursor a lead run recorded, if any."""
    created = (metadata or {}).get("cursor_created_date") or ""
    if not created:
        return None
    # Compare instants, not spellings.
    return (canonical_or_received(created), str((metadata or {}).get("cursor_id") or ""))


def cursor_verdict(current: Metadata | None, previous: Metadata | None) -> dg.AssetCheckResult:
    """Fail when the lead cursor stands before where the previous run left it."""
    now, before = lead_cursor(current), lead_cursor(previous)
    moved_back = before is not None and (now is None or now < before)
    return dg.AssetCheckResult(
        passed=not moved_back,
        metadata={
            "cursor": ", ".join(now) if now else "",
            "cursor_before": ", ".join(before) if before else "",
        },
    )


def completeness_verdict(current: Metadata | None) -> dg.AssetCheckResult:
    """Fail when the upstream reported a different total than the rows loaded.

    Runs that list only part of a stream (incremental walks) report no total and pass.
    """
    reported = (current or {}).get("reported_total")
    rows = int((current or {}).get("dagster/row_count", 0))
    if reported is None:
        return dg.AssetCheckResult(passed=True, metadata={"rows": rows, "reported_total": "n/a"})
    return dg.AssetCheckResult(
        passed=int(reported) == rows,
        metadata={"rows": rows, "reported_total": int(reported), "missing": int(reported) - rows},
    )


def no_large_shrink(asset: dg.AssetKey) -> AssetRule:
    """A blocking check: the asset's table did not shrink by more than SHRINK_LIMIT."""
    return AssetRule(
        asset,
        CheckRule(
            name=f"{asset.path[-1]}_no_large_shrink",
            description=f"Rows did not fall by more than {SHRINK_LIMIT:.0%} since the previous "
            "materialization, unless the run was a reconciliation.",
            verdict=lambda inputs: shrink_verdict(*inputs.recent_metadata()),
        ),
    )


def cursor_only_moves_forward(asset: dg.AssetKey) -> AssetRule:
    """A blocking check: the lead cursor never moves back."""
    return AssetRule(
        asset,
        CheckRule(
            name=f"{asset.path[-1]}_cursor_only_moves_forward",
            description=(
                "The (CreatedDate, Id) cursor is at or after where the previous run left it."
            ),
            verdict=lambda inputs: cursor_verdict(*inputs.recent_metadata()),
        ),
    )


def complete_against_upstream(asset: dg.AssetKey) -> AssetRule:
    """A blocking check: rows loaded equal the total the upstream reported."""
    return AssetRule(
        asset,
        CheckRule(
            name=f"{asset.path[-1]}_complete_against_upstream",
            description="Rows loaded equal the upstream's reported total (totalItems) of a full "
            "listing; incremental runs report none and pass.",
            verdict=lambda inputs: completeness_verdict(inputs.recent_metadata()[0]),
        ),
    )


# The checks a reader's kind calls for (its ``guards``), by name.
GUARDS: dict[str, Callable[[dg.AssetKey], AssetRule]] = {
    "cursor_only_moves_forward": cursor_only_moves_forward,
    "complete_against_upstream": complete_against_upstream,
}


def stream_rules() -> list[AssetRule]:
    """Every check of every step of the registry: its keys, its size against the run before,
    its reader's guards and its warnings."""
    rules: list[AssetRule] = []
    for stream in STREAMS:
        for step in stream.steps:
            key = dg.AssetKey(step.asset)
            rules.append(keys_unique_and_present(key, step.table))
            rules += [warns(key, stream.sql, warning) for warning in step.warnings]
            rules.append(no_large_shrink(key))
            rules += [GUARDS[guard](key) for guard in sorted(step.reader.guards)]
    return rules


def check_steps(rules: list[AssetRule]) -> list[dg.AssetChecksDefinition]:
    """The rules as a few check steps instead of one per check (see assets/checks.py).

    A check step runs once all its assets are in, so no step may hold an asset together with
    one that depends on it: a batch's checks form one step, an asset that another step needs
    has a step of its own (so its blocking checks run before what depends on it), and the
    checks of every other asset share the last step.
    """
    needed = {asset for step in all_steps() for asset in step.after}
    group_of: dict[str, str] = {}
    for step in all_steps():
        if step.batch is not None:
            group_of[step.asset] = f"{step.batch}_checks"
        elif step.asset in needed:
            group_of[step.asset] = f"{step.asset}_checks"
        else:
            group_of[step.asset] = "stream_checks"
    groups: dict[str, list[AssetRule]] = {}
    for rule in rules:
        groups.setdefault(group_of[rule.asset.to_user_string()], []).append(rule)
    return [grouped_checks(name, members) for name, members in groups.items()]


STREAM_CHECKS = check_steps(stream_rules())
