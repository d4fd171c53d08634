"""DuckDB DDL and analyst views, kept as .sql files and loaded by name."""

from __future__ import annotations

from importlib import resources

# Applied in this order when a warehouse is opened: tables first, then views over them.
SCHEMA_FILES: tuple[str, ...] = ("catalog", "warehouse", "crm", "internal", "sync_state")
# What brings an older warehouse's bookkeeping tables to the DDL, which CREATE TABLE IF NOT
# EXISTS cannot do for a dropped primary key: a query naming the tables still keyed, then the
# two halves of their rebuild (see ``ductwork.store.loading``).
BOOKKEEPING_REBUILD_FILES: tuple[str, str, str] = (
    "bookkeeping_keyed", "bookkeeping_set_aside", "bookkeeping_restore"
)  # fmt: skip
# Applied to every published snapshot (not to the working warehouse, whose every open would pay
# for them): the data dictionary's comments and the analyst views.
SNAPSHOT_FILES: tuple[str, ...] = ("serving", "table_comments", "analyst_views")
# The numbered lists serving.sql builds in a snapshot, each with the base table whose rows its
# ``row_id`` column points at (by rowid).
NUMBERED_LISTS: dict[str, str] = {
    "serving_digital_assets": "digital_assets",
    "serving_leads": "leads",
}


def read_sql(name: str) -> str:
    """The text of ``warehouse_sql/<name>.sql``."""
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


def snapshot_sql() -> str:
    """What a published snapshot gets beyond the warehouse's tables, in order."""
    return "\n".join(read_sql(name) for name in SNAPSHOT_FILES)


def schema_sql() -> str:
    """Every DDL statement of the warehouse, in dependency order."""
    return "\n".join(read_sql(name) for name in SCHEMA_FILES)


def quote_identifier(name: str) -> str:
    """A DuckDB identifier in double quotes (names come from the catalog, never from input)."""
    return '"' + name.replace('"', '""') + '"'
