"""``ductwork export``: every table and view of the current snapshot as Parquet, with a
manifest, into a folder or an S3 prefix (for BI tools and other engines). Each export is noted
in the data folder's registry of exports (``<home>/exports.jsonl``).

An export holds the same PII as the snapshot, so its files and the folders it creates follow
the data folder's rule (``ductwork.file_modes``); a target folder that already existed keeps
its own mode. A local export goes into a new or empty folder (any folder with ``--force``) and
never writes through a symlink (``ductwork.output_files``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError

from assets.resources import ObjectStore
from ductwork import output_files
from ductwork.erasure.exports import record_export
from ductwork.output_files import Folder
from ductwork.settings import HomeSettings, S3Settings, load
from ductwork.snapshots.store import StoreLocation
from pipelines.analyst_sql import sandboxed
from pipelines.snapshot_relations import Relation, describe
from warehouse_sql import fill, section

MANIFEST = "manifest.json"
DATA_FILE = "data.parquet"
BATCH_ROWS = 100_000


def export_relation(
    con: duckdb.DuckDBPyConnection, relation: Relation, folder: Folder, force: bool = False
) -> None:
    """Stream one table or view into ``<name>/data.parquet`` in ``folder``."""
    every_row = fill(section("tables", "every_row"), table=relation.name)
    reader = con.sql(every_row).to_arrow_reader(BATCH_ROWS)
    with (
        folder.subfolder(relation.name, force) as target,
        target.new_file(DATA_FILE, force) as sink,
        pq.ParquetWriter(sink, reader.schema, compression="zstd") as writer,
    ):
        for batch in reader:
            writer.write_batch(batch)


def manifest(relations: list[Relation], version: str) -> dict[str, Any]:
    """What an export holds: the snapshot version, when, the files written (the manifest
    aside) and, per table, its file, rows and schema."""
    return {
        "snapshot_version": version,
        "exported_at": datetime.now(UTC).isoformat(),
        "files": [f"{r.name}/{DATA_FILE}" for r in relations],
        "tables": [
            {
                "name": r.name,
                "kind": r.kind,
                "path": f"{r.name}/{DATA_FILE}",
                "rows": r.rows,
                "comment": r.comment,
                "schema": [
                    {"name": c.name, "type": c.data_type, "nullable": c.nullable} for c in r.columns
                ],
            }
            for r in relations
        ],
    }


def export_snapshot(snapshots_dir: Path, target: Path, force: bool = False) -> dict[str, Any]:
    """Write the current snapshot's tables and views under ``target``, a new or empty folder
    (any folder with ``force``, whose regular files of the same names are replaced); nothing
    is written through a symlink. Returns the manifest."""
    with sandboxed(snapshots_dir) as (snap, con), output_files.new_folder(target, force) as folder:
        relations = describe(con)
        for relation in relations:
            export_relation(con, relation, folder, force)
        content = manifest(relations, snap.version)
        with folder.new_file(MANIFEST, force) as sink:
            sink.write((json.dumps(content, indent=2) + "\n").encode())
    return content


def upload_folder(store: ObjectStore, folder: Path, prefix: str) -> int:
    """Copy every file under ``folder`` to ``prefix/`` in the store's bucket, the manifest last
    (so a reader that finds the manifest finds every file it names). Returns the file count."""
    client = store.client()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    for path in [*files, folder / MANIFEST]:
        key = "/".join(part for part in (prefix, path.relative_to(folder).as_posix()) if part)
        client.upload_file(str(path), store.bucket, key)
    return len(files) + 1


def run_export(target: str, home: HomeSettings, force: bool = False) -> int:
    """``ductwork export --to DIR|s3://bucket/prefix [--force]``; returns the exit code. A
    written export is noted in the data folder's registry of exports
    (``ductwork.erasure.exports``), so that an erasure can tell which still hold a key."""
    snapshots_dir = home.snapshots_dir
    try:
        if target.startswith("s3://"):
            location = StoreLocation.parse(target)
            s3 = load(S3Settings)
            store = ObjectStore(
                bucket=location.bucket, endpoint_url=s3.s3_endpoint_url, region_name=s3.s3_region
            )
            with tempfile.TemporaryDirectory(prefix="ductwork-export-") as staging:
                content = export_snapshot(snapshots_dir, Path(staging))
                upload_folder(store, Path(staging), location.prefix.rstrip("/"))
        else:
            content = export_snapshot(snapshots_dir, Path(target), force)
    except (FileNotFoundError, ValueError) as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
        print(f"ductwork: could not write to the object store: {exc}", file=sys.stderr)
        return 1
    exported_at = datetime.fromisoformat(content["exported_at"])
    record_export(home, target, content["snapshot_version"], exported_at)
    tables = content["tables"]
    print(
        f"exported {len(tables)} tables and views ({sum(t['rows'] for t in tables):,} rows) "
        f"of snapshot {content['snapshot_version']} to {target}"
    )
    return 0
