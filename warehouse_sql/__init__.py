"""DuckDB DDL and analyst views, kept as .sql files and loaded by name."""

from __future__ import annotations

from importlib import resources

# Applied in this order when a warehouse is opened: tables first, then views over them.
SCHEMA_FILES: tuple[str, ...] = (
    "catalog", "warehouse", "crm", "internal", "sync_state", "table_comments", "analyst_views",
)  # fmt: skip


def read_sql(name: str) -> str:
    """The text of ``warehouse_sql/<name>.sql``."""
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


def schema_sql() -> str:
    """Every DDL statement of the warehouse, in dependency order."""
    return "\n".join(read_sql(name) for name in SCHEMA_FILES)
