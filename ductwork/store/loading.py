"""Writing fetched records into the warehouse: typed columns plus the record's JSON."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

import duckdb

from ductwork.contract.encoding import dumps, parse_received_datetime
from ductwork.settings import SyncSettings, load
from ductwork.store.bookmarks import read_bookmark, write_bookmark
from ductwork.store.columns import Columns
from ductwork.upstream.schema_drift import RecordShape
from warehouse_sql import BOOKKEEPING_REBUILD_FILES, read_sql, schema_sql

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("ductwork.store")

Record = Mapping[str, Any]
RowOf = Callable[[Record], dict[str, Any]]


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


@dataclass(frozen=True)
class Replacement:
    """New rows for a table, or for the slice of it that ``where`` selects.

    ``table`` and ``where`` are identifiers and predicates written in this codebase, never
    values from the upstream; values travel in ``params`` or inside the Arrow table.
    """

    table: str
    rows: pa.Table
    where: str | None = None
    params: Sequence[object] = ()


@dataclass(frozen=True)
class Held:
    """Where a whole list is stored: a table, or the slice of it that ``where`` selects (an
    identifier and a predicate written in this codebase, as in ``Replacement``)."""

    table: str
    where: str | None = None
    params: tuple[object, ...] = ()


def _list_bookmark(stream: str, kind: str) -> str:
    return f"{stream}.{kind}"


@dataclass(frozen=True)
class ListContent:
    """What a whole-list read brought: a digest of its pages, and its number of records.

    Lists without ``updatedAfter`` are fetched whole on every run; when a fetch brings exactly
    what the last write stored, the rewrite (and its cost) is skipped.
    """

    stream: str
    digest: str
    rows: int
    pages: int = 0  # of a page-number list; 0 for an answer that is a single document

    @property
    def bookmark_key(self) -> str:
        """Its key in ``stream_state``."""
        return self.bookmark_key_of(self.stream)

    @staticmethod
    def bookmark_key_of(stream: str) -> str:
        """The key in ``stream_state`` of the content last stored for ``stream``."""
        return _list_bookmark(stream, "content")

    @classmethod
    def last_stored(cls, con: duckdb.DuckDBPyConnection, stream: str) -> ListContent | None:
        """The content the last write of ``stream`` recorded, if any."""
        saved = read_bookmark(con, cls.bookmark_key_of(stream))
        if saved is None:
            return None
        return cls(stream, saved["digest"], saved["rows"], saved.get("pages", 0))

    def still_held(self, con: duckdb.DuckDBPyConnection, held: Held) -> bool:
        """Whether ``held`` holds this content's number of rows."""
        condition = f" WHERE {held.where}" if held.where else ""
        rows = con.execute(f"SELECT count(*) FROM {held.table}{condition}", list(held.params))
        return rows.fetchall()[0][0] == self.rows

    def already_stored(self, con: duckdb.DuckDBPyConnection, held: Held) -> bool:
        """Whether the last write stored this very content and ``held`` still holds it."""
        return self.last_stored(con, self.stream) == self and self.still_held(con, held)

    def recorded_drift(self, con: duckdb.DuckDBPyConnection) -> dict[str, int] | None:
        """The schema-drift counts recorded for this very content, if any."""
        saved = read_bookmark(con, _list_bookmark(self.stream, "drift"))
        if saved is None or saved.get("digest") != self.digest:
            return None
        return dict(saved["counts"])

    def drift(
        self, con: duckdb.DuckDBPyConnection, shape: RecordShape, records: Sequence[Record]
    ) -> dict[str, int]:
        """The schema-drift counts of ``records`` (this content): as recorded for this very
        digest, or counted now and recorded. Counting looks at every member of every record
        (slow for the large lists); a list read unchanged need not count again."""
        counts = self.recorded_drift(con)
        if counts is None:
            counts = shape.drift(records)
            record = {"digest": self.digest, "counts": counts}
            write_bookmark(con, _list_bookmark(self.stream, "drift"), record)
        return counts


def replace_rows(
    con: duckdb.DuckDBPyConnection, *replacements: Replacement, content: ListContent | None = None
) -> None:
    """Apply replacements in one transaction: readers see all of them or none. ``content``,
    when given, is recorded in the same transaction as what the replaced rows hold."""
    con.execute("BEGIN TRANSACTION")
    try:
        if content is not None:
            recorded = {"digest": content.digest, "rows": content.rows, "pages": content.pages}
            write_bookmark(con, content.bookmark_key, recorded)
        for index, item in enumerate(replacements):
            view = f"incoming_rows_{index}"
            con.register(view, item.rows)
            if item.where is None:
                con.execute(f"DELETE FROM {item.table}")
            else:
                con.execute(f"DELETE FROM {item.table} WHERE {item.where}", list(item.params))
            con.execute(f"INSERT INTO {item.table} BY NAME SELECT * FROM {view}")
            con.unregister(view)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


# Where the digest of the DDL last applied is kept, in ``stream_state``.
SCHEMA_BOOKMARK = "warehouse.schema"


@cache
def _schema() -> tuple[str, dict[str, str]]:
    ddl = schema_sql()
    # The rebuild's files count too: a warehouse that applied this DDL before they existed
    # checks its bookkeeping tables once more.
    applied = "\n".join([ddl, *(read_sql(name) for name in BOOKKEEPING_REBUILD_FILES)])
    return ddl, {"digest": hashlib.blake2b(applied.encode(), digest_size=16).hexdigest()}


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Apply the DDL unless this very DDL was applied before.

    Every step opens the warehouse; running the 23 idempotent statements each time cost about
    10 ms per open, a comparison of digests costs well under one.
    """
    ddl, digest = _schema()
    try:
        if read_bookmark(con, SCHEMA_BOOKMARK) == digest:
            return
    except duckdb.CatalogException:  # a new warehouse: no stream_state yet
        pass
    con.execute(ddl)
    _rebuild_keyed_bookkeeping(con, ddl)
    write_bookmark(con, SCHEMA_BOOKMARK, digest)


def _rebuild_keyed_bookkeeping(con: duckdb.DuckDBPyConnection, ddl: str) -> list[str]:
    """Rebuild the bookkeeping tables without the primary key older warehouses gave them, every
    row kept, in one transaction; returns the tables that were still keyed (none: no rebuild).

    DuckDB commits a delete from an indexed table slowly, and these are emptied on every full
    sync; it cannot drop a key in place, so the tables move aside, the DDL creates them anew
    and their rows move back.
    """
    check, set_aside, restore = (read_sql(name) for name in BOOKKEEPING_REBUILD_FILES)
    keyed = [row[0] for row in con.execute(check).fetchall()]
    if not keyed:
        return []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(set_aside)
        con.execute(ddl)
        con.execute(restore)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    # Once per warehouse, and worth an operator's notice: a warning reaches stderr unconfigured.
    log.warning("rebuilt %s without the primary key of earlier releases", ", ".join(keyed))
    return keyed


def prepare_connection(con: duckdb.DuckDBPyConnection) -> None:
    """Set the sync's memory limit and put every table of the schema in place."""
    # DuckDB's own default (80 % of RAM) lets its buffers grow with the warehouse; a fixed
    # limit keeps the sync's memory flat as data grows (the setting's pattern admits nothing
    # but a number and a unit, so it is safe to place in the statement).
    con.execute(f"SET memory_limit = '{load(SyncSettings).warehouse_memory_limit}'")
    _ensure_schema(con)
