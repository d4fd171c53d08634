"""``ductwork sql``: a query on the current snapshot, printed for a person or a program."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from ductwork import snapshots


def run_query(query: str, output: str, snapshots_dir: Path, out_file: Path | None = None) -> int:
    """Run ``query`` read-only on the current snapshot; print it as table, csv or json, or
    write it to ``out_file`` (required for parquet, which is binary)."""
    if output == "parquet" and out_file is None:
        print("ductwork: --format parquet needs --output FILE", file=sys.stderr)
        return 2
    try:
        _, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    with con:
        try:
            if output == "parquet":
                con.sql(query).write_parquet(str(out_file))
                return 0
            frame = con.execute(query).df()
        except duckdb.Error as exc:
            print(f"ductwork: query failed: {exc}", file=sys.stderr)
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
        out_file.write_text(text, encoding="utf-8")
    return 0
