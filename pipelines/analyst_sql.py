"""``ductwork sql``: a query on the current snapshot, printed for a person or a program."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from ductwork import snapshots


def run_query(query: str, output: str, snapshots_dir: Path) -> int:
    """Run ``query`` read-only on the current snapshot and print it as table, csv or json."""
    try:
        _, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    with con:
        try:
            frame = con.execute(query).df()
        except duckdb.Error as exc:
            print(f"ductwork: query failed: {exc}", file=sys.stderr)
            return 1
    if output == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif output == "json":
        sys.stdout.write(frame.to_json(orient="records", date_format="iso") + "\n")
    else:
        with_options = frame.to_string(index=False, max_rows=200, max_colwidth=60)
        print(with_options)
    return 0
