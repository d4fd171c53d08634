"""The exports the mirror knows of: ``ductwork export`` writes Parquet outside the mirror's
reach, so each export is noted in the data folder's registry (``exports.jsonl``, one JSON line
per export: where, from which snapshot version, when), and an erasure can name the exports that
still hold a key. The mirror cannot erase them (nor copies others made of them): it says where
they are.

A line's ``location`` is a local folder (absolute) or an ``s3://bucket/prefix`` URL; only
local folders are searched for keys.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from ductwork import file_modes
from ductwork.settings import HomeSettings
from ductwork.streams.model import Stream
from ductwork.streams.registry import stream_named
from warehouse_sql import quote_identifier

MANIFEST = "manifest.json"
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class KnownExport:
    """One export of the registry: where it went, the snapshot version it came from, when."""

    location: str
    snapshot_version: str
    exported_at: str

    @property
    def folder(self) -> Path | None:
        """The export's local folder; None for one written to an object store."""
        return None if self.location.startswith("s3://") else Path(self.location)


def record_export(
    settings: HomeSettings, location: str, snapshot_version: str, exported_at: datetime
) -> None:
    """Append one export to the registry (created private if missing): ``location`` is the
    export's folder (made absolute) or its ``s3://`` URL."""
    if not location.startswith("s3://"):
        location = str(Path(location).expanduser().absolute())
    line = {
        "location": location,
        "snapshot_version": snapshot_version,
        "exported_at": exported_at.isoformat(),
    }
    path = settings.exports_registry
    modes = file_modes.current()
    modes.make_private_dir(path.parent)
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, _APPEND, modes.file_mode)
    try:
        os.write(fd, data)  # one write of one line: appends by others never interleave in it
        os.fsync(fd)
    finally:
        os.close(fd)
    modes.secure(path)


def known_exports(settings: HomeSettings) -> list[KnownExport]:
    """Every export of the registry, oldest first (a line that does not parse is skipped: a
    write cut short by a crash)."""
    try:
        text = settings.exports_registry.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            found.append(
                KnownExport(
                    str(entry["location"]),
                    str(entry["snapshot_version"]),
                    str(entry["exported_at"]),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return found


def exports_holding(settings: HomeSettings, stream: str, keys: Sequence[str]) -> list[Path]:
    """The local export folders of the registry that still exist and whose files of
    ``stream``'s tables (found through each export's manifest) hold any of ``keys`` in the
    table's key column, each once, in registry order. Read with DuckDB over the Parquet files;
    an export whose manifest or files went is passed over. KeyError for an unknown stream."""
    found: dict[Path, None] = {}
    if not keys:
        return []
    own = stream_named(stream)
    for known in known_exports(settings):
        folder = known.folder
        if folder is None or folder in found or not folder.is_dir():
            continue
        if _holds(folder, own, keys):
            found[folder] = None
    return list(found)


def _holds(folder: Path, stream: Stream, keys: Sequence[str]) -> bool:
    """Whether the export in ``folder`` holds any of ``keys`` in a table of ``stream``."""
    files = _stream_files(folder, stream)
    if not files:
        return False
    with duckdb.connect() as con:
        for path, column in files:
            try:
                held = con.execute(
                    f"SELECT count(*) > 0 FROM read_parquet(?) WHERE "
                    f"CAST({quote_identifier(column)} AS VARCHAR) IN (SELECT unnest(?::VARCHAR[]))",
                    [str(path), list(keys)],
                ).fetchall()[0][0]
            except duckdb.Error:  # a file removed or cut short since: nothing read from it
                continue
            if held:
                return True
    return False


def _stream_files(folder: Path, stream: Stream) -> list[tuple[Path, str]]:
    """The Parquet files of ``stream``'s keyed tables in the export, each with its key column
    (the first of the table's key), as the export's manifest names them."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        listed = {table["name"]: table["path"] for table in manifest["tables"]}
    except (OSError, ValueError, KeyError, TypeError):
        return []
    files = []
    for table in stream.tables:
        path = listed.get(table.name)
        if table.key and isinstance(path, str):
            target = folder / path
            if target.is_file() and folder.resolve() in target.resolve().parents:
                files.append((target, table.key[0]))
    return files
