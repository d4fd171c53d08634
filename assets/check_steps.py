"""How check rules run: as a few Dagster check steps, sharing inputs.

A check is a ``CheckRule``: a name, a description and a verdict computed from ``CheckInputs``.
``grouped_checks`` turns the rules of several assets into one multi-check, so that they share
one step and one warehouse connection: each step has a fixed cost in Dagster, and a run with
nothing new to sync is mostly such fixed costs.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.resources import DataHome, open_warehouse
from warehouse_sql import read_sql

Metadata = Mapping[str, Any]


class _SharedConnection:
    """The warehouse, opened on first use and closed with the step's exit stack."""

    def __init__(self, warehouse: DuckDBResource, stack: ExitStack) -> None:
        self._warehouse = warehouse
        self._stack = stack
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._primary_keys: dict[str, frozenset[str]] | None = None

    def get(self) -> duckdb.DuckDBPyConnection:
        if self._connection is None:
            self._connection = self._stack.enter_context(open_warehouse(self._warehouse))
        return self._connection

    def primary_keys(self) -> dict[str, frozenset[str]]:
        """Each table's primary-key columns, read once per step."""
        if self._primary_keys is None:
            rows = self.get().execute(read_sql("primary_keys")).fetchall()
            self._primary_keys = {table: frozenset(columns) for table, columns in rows}
        return self._primary_keys


@dataclass
class CheckInputs:
    """What the checks of one asset read, each opened or fetched at most once per step."""

    asset_key: dg.AssetKey
    warehouse: _SharedConnection
    data_home: DataHome
    instance: dg.DagsterInstance | None
    _recent: tuple[Metadata | None, Metadata | None] | None = field(default=None, repr=False)

    @classmethod
    def standalone(
        cls,
        asset_key: dg.AssetKey,
        warehouse: DuckDBResource,
        data_home: DataHome,
        stack: ExitStack,
    ) -> "CheckInputs":
        """Inputs outside a run (no instance to read metadata from)."""
        return cls(asset_key, _SharedConnection(warehouse, stack), data_home, None)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The warehouse, opened once for the whole step."""
        return self.warehouse.get()

    def recent_metadata(self) -> tuple[Metadata | None, Metadata | None]:
        """The metadata of the asset's latest materialization and of the one before it."""
        if self._recent is None:
            found: list[Metadata] = []
            if self.instance is not None:
                records = self.instance.fetch_materializations(self.asset_key, limit=2).records
                found = [
                    {name: value.value for name, value in r.asset_materialization.metadata.items()}
                    for r in records
                    if r.asset_materialization
                ]
            self._recent = (found[0] if found else None, found[1] if len(found) > 1 else None)
        return self._recent


@dataclass(frozen=True)
class CheckRule:
    """One check of an asset: its name, what it promises and how its verdict is reached."""

    name: str
    description: str
    verdict: Callable[[CheckInputs], dg.AssetCheckResult]
    blocking: bool = True
    additional_deps: tuple[str, ...] = ()


# The asset a rule checks, by key: one multi-asset step may materialise several checked assets.
class AssetRule(NamedTuple):
    """A check rule and the asset it checks."""

    asset: dg.AssetKey
    rule: CheckRule


def grouped_checks(name: str, rules: Sequence[AssetRule]) -> dg.AssetChecksDefinition:
    """Every rule given, for whichever assets, as one multi-check (one step) called ``name``.

    The step runs once all the checked assets are materialised, so a group must not hold an
    asset together with one that depends on it. A run may select any subset of the checks;
    only the selected ones are evaluated.
    """
    specs = [
        dg.AssetCheckSpec(
            rule.name,
            asset=asset,
            blocking=rule.blocking,
            description=rule.description,
            additional_deps=list(rule.additional_deps),
        )
        for asset, rule in rules
    ]
    checked = sorted({asset.to_user_string() for asset, _ in rules})

    @dg.multi_asset_check(
        specs=specs, name=name, can_subset=True,
        description=f"The checks of {', '.join(checked)}, in one step.",
    )  # fmt: skip
    def _checks(
        context: dg.AssetCheckExecutionContext, warehouse: DuckDBResource, data_home: DataHome
    ) -> Iterator[dg.AssetCheckResult]:
        selected = context.selected_asset_check_keys
        with ExitStack() as stack:
            connection = _SharedConnection(warehouse, stack)
            inputs_of: dict[dg.AssetKey, CheckInputs] = {}  # one per asset: its metadata
            for asset, rule in rules:
                if dg.AssetCheckKey(asset, rule.name) in selected:
                    inputs = inputs_of.setdefault(
                        asset, CheckInputs(asset, connection, data_home, context.instance)
                    )
                    yield evaluate(rule, inputs)

    return _checks


def evaluate(rule: CheckRule, inputs: CheckInputs) -> dg.AssetCheckResult:
    """The rule's verdict, named as its check."""
    verdict = rule.verdict(inputs)
    return dg.AssetCheckResult(
        asset_key=inputs.asset_key,
        check_name=rule.name,
        passed=verdict.passed,
        severity=verdict.severity,
        metadata=verdict.metadata,
    )
