"""``ductwork sql``: a query on the current snapshot, printed for a person or a program.

The query is the analyst's own text, and the command may run as the service account, so the
connection reaches nothing but the snapshot: DuckDB's file system, network and extension
access are off and its configuration is locked (no ``SET`` can turn them back on) from the
moment the snapshot is open. Output files are written by this command, outside DuckDB.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from ductwork import file_modes, snapshots

# Applied as the snapshot opens: the database file itself is attached first, then nothing
# else on the file system (read_csv, COPY, ATTACH, EXPORT), no extension installed or loaded,
# no secret kept on disk, and no setting changed afterwards.
SANDBOX: dict[str, object] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_persistent_secrets": False,
    "lock_configuration": True,
}
BATCH_ROWS = 100_000


def open_sandboxed(snapshots_dir: Path) -> tuple[snapshots.Snapshot, duckdb.DuckDBPyConnection]:
    """The current snapshot, read-only, on a connection that reaches nothing else."""
    return snapshots.open_current(snapshots_dir, SANDBOX)


def run_query(query: str, output: str, snapshots_dir: Path, out_file: Path | None = None) -> int:
    """Run ``query`` read-only on the current snapshot; print it as table, csv or json, or
    write it to ``out_file`` (required for parquet, which is binary)."""
    if output == "parquet" and out_file is None:
        print("ductwork: --format parquet needs --output FILE", file=sys.stderr)
        return 2
    try:
        _, con = open_sandboxed(snapshots_dir)
    except FileNotFoundError as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    with con:
        try:
            if output == "parquet" and out_file is not None:
                write_parquet(con, query, out_file)
                return 0
            frame = con.execute(query).df()
        except (duckdb.Error, ValueError) as exc:
            print(f"ductwork: query failed: {_first_line(exc)}", file=sys.stderr)
            return 1
    if output == "csv":
        text = frame.to_csv(index=False)
    elif output == "json":
        text = frame.to_json(orient="records", date_format="iso") + "\n"
    else:
        text = frame.to_string(index=False, max_rows=200, max_colwidth=60) + "\n"
    if out_file is None:
        sys.stdout.write(text)
    else:
        file_modes.current().write_private(out_file, text.encode("utf-8"))
    return 0


def write_parquet(con: duckdb.DuckDBPyConnection, query: str, out_file: Path) -> None:
    """Stream the query's result into ``out_file`` through pyarrow, with the private file
    mode; a query that fails part way leaves no file behind."""
    relation = con.sql(query)
    if relation is None:
        raise ValueError("the statement returns no rows to write")
    reader = relation.to_arrow_reader(BATCH_ROWS)
    modes = file_modes.current()
    try:
        with pq.ParquetWriter(out_file, reader.schema, compression="zstd") as writer:
            modes.secure(out_file)
            for batch in reader:
                writer.write_batch(batch)
    except BaseException:
        out_file.unlink(missing_ok=True)
        raise


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
