"""``ductwork sql``: a query on the current snapshot, printed for a person or a program.

The query is the analyst's own text, and the command may run as the service account, so the
connection reaches nothing but the snapshot: DuckDB's file system, network and extension
access are off and its configuration is locked (no ``SET`` can turn them back on) from the
moment the snapshot is open. What DuckDB spills to disk goes to a private folder of the
command's own, up to ``DUCTWORK_SQL_TEMP_LIMIT``, removed when it ends. Output files are written
by this command, outside DuckDB, as new files that never follow a symlink
(``ductwork.output_files``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import duckdb
import pyarrow.parquet as pq

from ductwork import output_files, snapshots
from ductwork.settings import AnalystSettings, load
from ductwork.snapshots import guard

if TYPE_CHECKING:
    import pandas as pd

# Applied as the snapshot opens (the settings the read API opens snapshots with): the database
# file itself is attached first, then nothing else on the file system (read_csv, COPY, ATTACH,
# EXPORT), no extension installed or loaded, no secret kept on disk, no setting changed after.
SANDBOX = guard.LOCKED
BATCH_ROWS = 100_000


SPILL_PREFIX = "ductwork-sql-"


@contextmanager
def sandboxed(
    snapshots_dir: Path,
) -> Iterator[tuple[snapshots.Snapshot, duckdb.DuckDBPyConnection]]:
    """The current snapshot, read-only, on a connection that reaches nothing else. DuckDB
    spills to a fresh private folder under the system's temporary folder (``TMPDIR``), at most
    ``DUCTWORK_SQL_TEMP_LIMIT``, and the folder goes when the block ends."""
    limits = load(AnalystSettings)
    spill = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX))  # 0700
    try:
        config = {**SANDBOX, "temp_directory": str(spill), "lock_configuration": False}
        if limits.sql_memory_limit is not None:
            config["memory_limit"] = limits.sql_memory_limit
        snap, con = snapshots.open_current(snapshots_dir, config)
        with con:
            # DuckDB 2.0 reports a max_temp_directory_size given as the database opens but
            # spills past it; set on the open connection, the limit holds. Then the lock.
            con.execute("SET max_temp_directory_size = ?", [limits.sql_temp_limit])
            con.execute("SET lock_configuration = true")
            yield snap, con
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def run_query(
    query: str,
    output: str,
    snapshots_dir: Path,
    out_file: Path | None = None,
    force: bool = False,
) -> int:
    """Run ``query`` read-only on the current snapshot; print it as table, csv or json, or
    write it to ``out_file`` (required for parquet, which is binary), a new file unless
    ``force`` lets it replace a regular one (``ductwork.output_files``)."""
    if output == "parquet" and out_file is None:
        print("ductwork: --format parquet needs --output FILE", file=sys.stderr)
        return 2
    destination = nullcontext(None) if out_file is None else output_files.new_file(out_file, force)
    try:
        # The destination is checked before the query runs, and takes its name only once the
        # result is written whole: a failed query leaves it as it was.
        with sandboxed(snapshots_dir) as (_, con), destination as sink:
            if output == "parquet" and sink is not None:
                write_parquet(con, query, sink)
            else:
                text = render(con.execute(query).df(), output)
                if sink is None:
                    sys.stdout.write(text)
                else:
                    sink.write(text.encode("utf-8"))
    except FileNotFoundError as exc:  # nothing published yet
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    except (duckdb.Error, ValueError) as exc:
        print(f"ductwork: query failed: {_first_line(exc)}", file=sys.stderr)
        return 1
    return 0


def render(frame: pd.DataFrame, output: str) -> str:
    """A result as csv, json (records) or a table for a person."""
    if output == "csv":
        return frame.to_csv(index=False)
    if output == "json":
        return frame.to_json(orient="records", date_format="iso") + "\n"
    return frame.to_string(index=False, max_rows=200, max_colwidth=60) + "\n"


def write_parquet(con: duckdb.DuckDBPyConnection, query: str, sink: BinaryIO) -> None:
    """Stream the query's result into ``sink`` through pyarrow, a batch at a time."""
    relation = con.sql(query)
    if relation is None:
        raise ValueError("the statement returns no rows to write")
    reader = relation.to_arrow_reader(BATCH_ROWS)
    with pq.ParquetWriter(sink, reader.schema, compression="zstd") as writer:
        for batch in reader:
            writer.write_batch(batch)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
