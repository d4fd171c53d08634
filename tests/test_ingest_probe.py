"""The ingest probe compares like with like: the landed design stores exactly the rows the
sync's own code stores, and the table it weighs with a primary key refuses a second copy. A unit
test on in-memory databases (the probe's own setting)."""

from __future__ import annotations

import duckdb
import pytest

from bench.ingest_probe import (
    fresh_table,
    inserted,
    landed,
    same_rows,
    sandbox_bodies,
    today,
    with_key,
)


def test_the_landed_design_stores_the_same_rows_as_todays_code() -> None:
    bodies = sandbox_bodies("small")[:3000]
    ours, theirs = fresh_table(), fresh_table()
    today(ours, bodies)
    landed(theirs, bodies)
    assert ours.execute("SELECT count(*) FROM lead_details").fetchall() == [(3000,)]
    assert same_rows(ours, theirs)
    theirs.execute("UPDATE lead_details SET email = 'changed' WHERE id = ?", [bodies[0][0]])
    assert not same_rows(ours, theirs)


def test_the_keyed_table_refuses_a_second_copy_of_a_record_the_ddls_table_takes() -> None:
    bodies = sandbox_bodies("small")[:10]
    keyed, unkeyed = fresh_table(), fresh_table()
    with_key(keyed)
    inserted(unkeyed, bodies + bodies)
    assert unkeyed.execute("SELECT count(*) FROM lead_details").fetchall() == [(20,)]
    inserted(keyed, bodies)
    with pytest.raises(duckdb.ConstraintException):
        inserted(keyed, bodies)
