"""Writing fetched records into the warehouse: typed columns plus the record's JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import duckdb

from ductwork.contract.encoding import dumps, parse_received_datetime
from ductwork.streams.model import Table
from ductwork.warehouse.columns import Columns, pyarrow_without_pandas
from ductwork.warehouse.memory_headroom import with_memory_headroom
from ductwork.warehouse.sync_state import CONTENT, DRIFT, read_state, write_state
from warehouse_sql import fill, quote_identifier, section

if TYPE_CHECKING:
    import pyarrow as pa

Record = Mapping[str, Any]
RowOf = Callable[[Record], dict[str, Any]]
# Counts an operator wants beside a step's row count, read after its write.
Facts = Callable[[duckdb.DuckDBPyConnection], dict[str, int]]


def no_facts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """No counts beside the row count."""
    return {}


def timestamp_or_none(value: object) -> datetime | None:
    """A contract date-time as a UTC datetime; anything else (absent, malformed) is None."""
    if not isinstance(value, str):
        return None
    try:
        return parse_received_datetime(value)
    except ValueError:
        return None


def text_or_none(value: object) -> str | None:
    """A string member, or None when absent or of another type."""
    return value if isinstance(value, str) else None


def name_of(value: object) -> str | None:
    """The ``name`` of a ``{"name": ...}`` member (series, family)."""
    return text_or_none(value.get("name")) if isinstance(value, Mapping) else None


def rows_table(
    records: Iterable[Record], row_of: RowOf, columns: Columns, synced_at: datetime | None = None
) -> pa.Table:
    """Build an Arrow table of typed rows; each row carries its record's JSON and sync time."""
    moment = synced_at or datetime.now(UTC)
    with_record, with_time = "record" in columns.names, "synced_at" in columns.names
    rows = []
    for record in records:
        row = row_of(record)
        if with_record:
            row["record"] = dumps(record).decode()
        if with_time:
            row["synced_at"] = moment
        rows.append(row)
    return columns.table(rows)


def stamped(rows: pa.Table, moment: datetime | None = None) -> pa.Table:
    """``rows`` with every ``synced_at`` set to ``moment`` (default: now): rows built as their
    records arrived are stamped when they are stored."""
    pa = pyarrow_without_pandas()
    when = rows.schema.get_field_index("synced_at")
    field = rows.schema.field(when)
    moment = moment or datetime.now(UTC)
    return rows.set_column(when, field, pa.array([moment] * rows.num_rows, field.type))


@dataclass(frozen=True)
class Replacement:
    """New rows for a table, or for the slice of it the ``Table`` names."""

    table: Table
    rows: pa.Table


def count_rows(con: duckdb.DuckDBPyConnection, table: Table) -> int:
    """The rows of ``table`` (of its slice, when it names one)."""
    if table.slice_column is None:
        found = con.execute(fill(section("tables", "count"), table=table.name))
    else:
        statement = fill(
            section("tables", "count_slice"), table=table.name, column=table.slice_column
        )
        found = con.execute(statement, [table.slice_value])
    return found.fetchall()[0][0]


@dataclass(frozen=True)
class KeyFaults:
    """What a table's key check counted where no primary key enforces the key: rows with a
    NULL in it, and rows beyond the first of each key."""

    null_keys: int
    repeated_keys: int


def key_faults(con: duckdb.DuckDBPyConnection, table: Table) -> KeyFaults:
    """Count the rows of ``table`` (the whole table, every slice) that break its key."""
    columns = [quote_identifier(column) for column in table.key]
    statement = (
        fill(section("tables", "key_faults"), table=table.name)
        .replace("{key}", ", ".join(columns))
        .replace("{any_null}", " OR ".join(f"{column} IS NULL" for column in columns))
    )
    null_keys, repeated_keys = con.execute(statement).fetchall()[0]
    return KeyFaults(null_keys, repeated_keys)


@dataclass(frozen=True)
class ListContent:
    """What a whole-list read brought: a digest of its pages, and its number of records.

    Lists without ``updatedAfter`` are fetched whole on every run; when a fetch brings exactly
    what the last write stored, the rewrite (and its cost) is skipped.
    """

    asset: str
    digest: str
    rows: int
    pages: int = 0  # of a page-number list; 0 for an answer that is a single document

    @property
    def state_key(self) -> str:
        """Its key in ``sync_state``."""
        return self.asset + CONTENT

    @classmethod
    def last_stored(cls, con: duckdb.DuckDBPyConnection, asset: str) -> ListContent | None:
        """The content the last write of ``asset`` recorded, if any."""
        saved = read_state(con, asset + CONTENT)
        if saved is None:
            return None
        return cls(asset, saved["digest"], saved["rows"], saved.get("pages", 0))

    def still_held(self, con: duckdb.DuckDBPyConnection, table: Table) -> bool:
        """Whether ``table`` holds this content's number of rows."""
        return count_rows(con, table) == self.rows

    def already_stored(self, con: duckdb.DuckDBPyConnection, table: Table) -> bool:
        """Whether the last write stored this very content and ``table`` still holds it."""
        return self.last_stored(con, self.asset) == self and self.still_held(con, table)

    def recorded_drift(self, con: duckdb.DuckDBPyConnection) -> dict[str, int] | None:
        """The schema-drift counts recorded for this very content, if any."""
        saved = read_state(con, self.asset + DRIFT)
        if saved is None or saved.get("digest") != self.digest:
            return None
        return dict(saved["counts"])

    def drift(
        self, con: duckdb.DuckDBPyConnection, count: Callable[[], dict[str, int]]
    ) -> dict[str, int]:
        """The schema-drift counts of this content: as recorded for this very digest, or
        ``count``-ed now and recorded. Counting looks at every member of every record (slow
        for the large lists); a list read unchanged need not count again."""
        counts = self.recorded_drift(con)
        if counts is None:
            counts = count()
            write_state(con, self.asset + DRIFT, {"digest": self.digest, "counts": counts})
        return counts


def replace_rows(
    con: duckdb.DuckDBPyConnection, *replacements: Replacement, content: ListContent | None = None
) -> None:
    """Apply replacements in one transaction: readers see all of them or none. ``content``,
    when given, is recorded in the same transaction as what the replaced rows hold. Retried
    under a raised memory limit when DuckDB runs out of memory (``memory_headroom``)."""
    names = ", ".join(item.table.name for item in replacements)
    with_memory_headroom(
        con, lambda: _replace_once(con, replacements, content), what=f"replacing {names}"
    )


def _replace_once(
    con: duckdb.DuckDBPyConnection,
    replacements: Sequence[Replacement],
    content: ListContent | None,
) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        if content is not None:
            recorded = {"digest": content.digest, "rows": content.rows, "pages": content.pages}
            write_state(con, content.state_key, recorded)
        for index, item in enumerate(replacements):
            rows, table = f"incoming_rows_{index}", item.table
            con.register(rows, item.rows)
            if table.slice_column is None:
                con.execute(fill(section("tables", "delete"), table=table.name))
            else:
                delete = section("tables", "delete_slice")
                con.execute(
                    fill(delete, table=table.name, column=table.slice_column), [table.slice_value]
                )
            con.execute(fill(section("tables", "insert"), table=table.name, rows=rows))
            con.unregister(rows)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
