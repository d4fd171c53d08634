"""The warehouse's SQL, kept as .sql files and loaded by name.

Every statement that names a table lives here. A stream's SQL is one file,
``streams/<stream>.sql``, cut into sections by lines ``-- name: <section>``: ``tables`` (its
DDL), ``comments`` (the data dictionary's text), ``serving`` and ``views`` (built in every
published snapshot), and the statements its sync runs. The shared files (``sync_state.sql``,
``product_images.sql``) are cut the same way; the others are one statement each.

Python passes values as parameters only. A statement that works on any stream's table
(``tables.sql``) names it ``{table}``, filled by ``fill`` with a quoted identifier from the
registry, never with a value.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_SECTION = re.compile(r"^-- name: (\w+)[ \t]*$", re.M)
# The shared files with sections, applied before and after the streams' own.
SHARED_FILES: tuple[str, ...] = ("sync_state", "product_images", "history")


def read_sql(name: str) -> str:
    """The whole text of ``warehouse_sql/<name>.sql``."""
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


@cache
def _sections(path: str) -> dict[str, str]:
    text = resources.files(__name__).joinpath(path).read_text(encoding="utf-8")
    marks = list(_SECTION.finditer(text))
    return {
        mark.group(1): text[
            mark.end() : marks[i + 1].start() if i + 1 < len(marks) else None
        ].strip("\n")
        for i, mark in enumerate(marks)
    }


def section(file: str, name: str) -> str:
    """Section ``name`` of ``warehouse_sql/<file>.sql`` (``streams/x`` for a stream's file);
    empty text when the file has no such section."""
    return _sections(f"{file}.sql").get(name, "")


def stream_section(stream_sql: str, name: str) -> str:
    """Section ``name`` of a stream's file, ``warehouse_sql/streams/<stream_sql>.sql``."""
    return section(f"streams/{stream_sql}", name)


def has_stream_file(stream_sql: str) -> bool:
    """Whether ``warehouse_sql/streams/<stream_sql>.sql`` exists."""
    return resources.files(__name__).joinpath(f"streams/{stream_sql}.sql").is_file()


def quote_identifier(name: str) -> str:
    """A DuckDB identifier in double quotes (names come from the registry, never from input)."""
    return '"' + name.replace('"', '""') + '"'


def fill(statement: str, **identifiers: str) -> str:
    """A template statement with each ``{name}`` replaced by the quoted identifier given for
    it (identifiers from the registry or this codebase, never from input)."""
    for name, identifier in identifiers.items():
        statement = statement.replace("{" + name + "}", quote_identifier(identifier))
    return statement
