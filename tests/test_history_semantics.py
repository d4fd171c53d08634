"""What the mirror remembers, publish by publish, on real DuckDB files: the changes feed's net
changes (changed back, deleted and re-added), a walk that spans a publish, the past rebuilt
from a later snapshot's history, pruning and its 410, and tokens this mirror did not issue.

Unit tests of the history's core: rows are written into a warehouse directly and published with
``snapshots.publish``, as the publish step does, without a sync around them. The feed and the
past as users reach them (``ductwork serve``, the sandbox, real syncs) are tested in
``tests/test_mirror_memory.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from ductwork import snapshots
from ductwork.history import feed, feed_entries, feed_queries, row_versions
from ductwork.history.past import BeforeHistory, publish_at, rebuild
from ductwork.snapshots import guard
from ductwork.streams.model import Stream
from ductwork.streams.registry import CONTRACTORS, DIGITAL_ASSETS, LEADS, PAIRINGS, STREAMS
from ductwork.warehouse.schema import schema_sql
from warehouse_sql import fill, section, stream_section

STREAM = PAIRINGS.name


class Mirror:
    """A warehouse of pairings only, published by hand."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.snapshots = folder / "snapshots"
        self.con = duckdb.connect(str(folder / "warehouse.duckdb"))
        self.con.execute(schema_sql())

    def put(self, relationship_id: int, record: str) -> None:
        self.con.execute("DELETE FROM pairings WHERE relationship_id = ?", [relationship_id])
        self.con.execute(
            "INSERT INTO pairings VALUES (?, 'Pairing', now(), ?, now())", [relationship_id, record]
        )

    def put_contractor(self, contractor_id: str, record: str) -> None:
        self.con.execute("DELETE FROM contractors WHERE contractor_id = ?", [contractor_id])
        self.con.execute(
            "INSERT INTO contractors VALUES (?, 'A', 'B', 'CA', 4.5, ?, now())",
            [contractor_id, record],
        )

    def drop(self, relationship_id: int) -> None:
        self.con.execute("DELETE FROM pairings WHERE relationship_id = ?", [relationship_id])

    def publish(self, keep: timedelta = timedelta(days=90)) -> snapshots.Snapshot:
        return snapshots.publish(self.con, self.snapshots, keep).snapshot

    def rows_as_of(self, later: snapshots.Snapshot, version: str, query: str) -> list[tuple]:
        """``query``'s rows on the past at publish ``version``, rebuilt from the history of
        the ``later`` snapshot."""
        with duckdb.connect(str(later.path), read_only=True) as con:
            kept = feed_queries.publishes(con)
        out = self.folder / f"rebuilt-{version}.duckdb"
        rebuild(later.path, publish_at(kept, version), out)
        with duckdb.connect(str(out), read_only=True) as rebuilt:
            return rebuilt.execute(query).fetchall()

    def walk(
        self, since: str | None, limit: int = 1000, stream: Stream = PAIRINGS
    ) -> tuple[list[feed_entries.Change], str]:
        """The whole walk of ``stream`` from ``since`` on the current snapshot: its changes
        and the token that follows it."""
        _, con = snapshots.open_current(self.snapshots)
        with con:
            mirror = feed.mirror_id(con)
            position = (
                feed.Position(stream.name, None)
                if since is None
                else feed.decode_token(since, mirror)
            )
            found: list[feed_entries.Change] = []
            while True:
                page = feed.read_page(con, stream.name, stream.sql, position, limit)
                found += page.changes
                if not page.has_more:
                    return found, page.next_token
                position = feed.decode_token(page.next_token, mirror)


def state_of(
    changes: list[feed_entries.Change], start: dict[str, str] | None = None
) -> dict[str, str]:
    """What a consumer holds after applying ``changes`` to ``start``."""
    held = dict(start or {})
    for change in changes:
        if change.op == "delete":
            held.pop(change.key, None)
        else:
            assert change.record is not None
            held[change.key] = change.record.decode()
    return held


def test_the_feed_gives_every_record_then_each_key_changed_since_once_in_its_final_state(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    for number in range(1, 6):
        mirror.put(number, f'{{"relationshipId":{number},"n":0}}')
    mirror.publish()
    loaded, token = mirror.walk(None)
    assert [c.op for c in loaded] == ["upsert"] * 5
    held = state_of(loaded)

    mirror.put(1, '{"relationshipId":1,"n":1}')  # changed
    mirror.put(2, '{"relationshipId":2,"n":1}')  # changed, then changed back below
    mirror.drop(3)  # deleted
    mirror.drop(4)  # deleted, then re-added below
    mirror.put(6, '{"relationshipId":6,"n":0}')  # added
    mirror.put(7, '{"relationshipId":7,"n":0}')  # added, then deleted below
    mirror.publish()
    mirror.put(2, '{"relationshipId":2,"n":0}')
    mirror.put(4, '{"relationshipId":4,"n":9}')
    mirror.drop(7)
    mirror.publish()

    changes, _ = mirror.walk(token)
    keys = [change.key for change in changes]
    assert len(keys) == len(set(keys)), "each key at most once"
    assert "5" not in keys  # untouched
    # A key whose final state equals its state at the token (2: changed and changed back; 7:
    # added and deleted) is given once in that final state, as the contract allows.
    assert {c.key: (c.op, c.record) for c in changes} == {
        "1": ("upsert", b'{"relationshipId":1,"n":1}'),
        "2": ("upsert", b'{"relationshipId":2,"n":0}'),
        "3": ("delete", None),
        "4": ("upsert", b'{"relationshipId":4,"n":9}'),
        "6": ("upsert", b'{"relationshipId":6,"n":0}'),
        "7": ("delete", None),
    }
    now = {
        str(n): r
        for n, r in mirror.con.execute("SELECT relationship_id, record FROM pairings").fetchall()
    }
    assert state_of(changes, held) == now
    versions = [(c.version, c.key) for c in changes]
    assert versions == sorted(versions)  # ordered by (version, key)


def test_a_walk_pinned_to_its_first_page_does_not_mix_in_a_publish_made_meanwhile(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    for number in range(1, 8):
        mirror.put(number, f'{{"relationshipId":{number}}}')
    first = mirror.publish()
    _, con = snapshots.open_current(mirror.snapshots)
    with con:
        page = feed.read_page(con, STREAM, PAIRINGS.sql, feed.Position(STREAM, None), 3)
    assert page.has_more and page.pinned.version == first.version

    mirror.put(8, '{"relationshipId":8}')
    mirror.put(1, '{"relationshipId":1,"later":true}')
    mirror.publish()
    rest, token = mirror.walk(page.next_token)
    loaded = state_of([*page.changes, *rest])
    assert sorted(loaded, key=int) == [str(n) for n in range(1, 8)]  # the pinned publish's keys
    assert loaded["1"] == '{"relationshipId":1}'  # as pinned, not as changed since
    after, _ = mirror.walk(token)  # the next walk brings what changed meanwhile
    assert state_of(after, loaded)["1"] == '{"relationshipId":1,"later":true}'
    assert "8" in state_of(after, loaded)


def test_the_past_is_rebuilt_from_a_later_snapshots_history_as_it_was_published(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1,"v":"first"}')
    mirror.put(2, '{"relationshipId":2,"v":"first"}')
    first = mirror.publish()
    mirror.put(1, '{"relationshipId":1,"v":"second"}')
    mirror.drop(2)
    mirror.put(3, '{"relationshipId":3,"v":"second"}')
    second = mirror.publish()
    with duckdb.connect(str(first.path), read_only=True) as old:
        published = sorted(old.execute("SELECT * EXCLUDE (synced_at) FROM pairings").fetchall())
    with duckdb.connect(str(second.path), read_only=True) as con:
        kept = feed_queries.publishes(con)
    out = tmp_path / "rebuilt.duckdb"
    rebuild(second.path, publish_at(kept, first.version), out)
    with duckdb.connect(str(out), read_only=True) as rebuilt:
        again = sorted(rebuilt.execute("SELECT * EXCLUDE (synced_at) FROM pairings").fetchall())
        served = rebuilt.execute("SELECT version FROM snapshot_info").fetchall()
    assert again == published
    assert served == [(first.version,)]


def test_a_table_a_publish_did_not_change_keeps_its_versions_and_its_feed_as_they_were(
    tmp_path: Path,
) -> None:
    # A publish passes over the tables whose content it finds unchanged: what it skips must
    # be what comparing them would have found.
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    mirror.put_contractor("c1", '{"contractorId":"c1","v":1}')
    first = mirror.publish()
    _, token = mirror.walk(None, stream=CONTRACTORS)
    mirror.put(1, '{"relationshipId":1,"v":2}')  # pairings change, contractors do not
    mirror.put_contractor("c1", '{"contractorId":"c1","v":1}')  # rewritten as it was
    second = mirror.publish()
    assert mirror.walk(token, stream=CONTRACTORS)[0] == []
    mirror.put_contractor("c1", '{"contractorId":"c1","v":3}')
    mirror.put_contractor("c2", '{"contractorId":"c2"}')
    third = mirror.publish()
    changes, _ = mirror.walk(token, stream=CONTRACTORS)
    assert [(c.key, c.op, c.version) for c in changes] == [
        ("c1", "upsert", third.version), ("c2", "upsert", third.version)
    ]  # fmt: skip
    query = "SELECT record->>'v' FROM contractors WHERE contractor_id = 'c1'"
    for published, expected in ((first, "1"), (second, "1"), (third, "3")):
        found = mirror.rows_as_of(third, published.version, query)
        assert found == [(expected,)], published.version


def test_a_table_versioned_for_the_first_time_is_compared_even_when_unchanged(
    tmp_path: Path,
) -> None:
    # As when a release starts keeping the versions of a table the warehouse already held.
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    mirror.put_contractor("c1", '{"contractorId":"c1"}')
    mirror.publish()
    mirror.con.execute('DROP TABLE history."contractors__since"')
    mirror.put(1, '{"relationshipId":1,"v":2}')  # contractors unchanged
    second = mirror.publish()
    found = mirror.rows_as_of(second, second.version, "SELECT contractor_id FROM contractors")
    assert found == [("c1",)]


def test_the_fingerprint_from_the_rows_hashed_for_the_history_is_the_one_read_from_the_tables(
    tmp_path: Path,
) -> None:
    # A publish hashes the versioned tables' rows once and sums those hashes into the content
    # fingerprint: it must be the fingerprint of the tables themselves, or a publish would
    # find content changed (or unchanged) that is not.
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    mirror.put(2, '{"relationshipId":2}')
    mirror.put_contractor("c1", '{"contractorId":"c1"}')
    mirror.con.execute("INSERT INTO contractors_raw VALUES ('{\"data\":[]}', NULL, now())")
    hashed = row_versions.hash_current_rows(mirror.con)
    assert {"pairings", "contractors", "contractors_raw"} <= set(hashed)
    fingerprint = snapshots.content_fingerprint(mirror.con, hashed)
    assert fingerprint == snapshots.content_fingerprint(mirror.con)
    assert "pairings:2:" in fingerprint and "contractors_raw:1:" in fingerprint


def test_tables_are_unchanged_only_when_both_fingerprints_name_the_same_release() -> None:
    before = "contractors:1:7;pairings:2:9;publish-sql:aa"
    assert snapshots.unchanged_tables(before, "contractors:1:7;pairings:2:8;publish-sql:aa") == {
        "contractors"
    }
    assert (
        snapshots.unchanged_tables(before, "contractors:1:7;pairings:2:9;publish-sql:bb") == set()
    )
    assert snapshots.unchanged_tables(None, before) == set()
    # A table the current snapshot lacks is new, so changed.
    assert snapshots.unchanged_tables(before, "manuals:0:0;publish-sql:aa") == set()


def test_history_older_than_the_days_kept_is_dropped_and_its_tokens_are_gone(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    mirror.publish()
    _, old_token = mirror.walk(None)
    mirror.put(1, '{"relationshipId":1,"n":2}')
    second = mirror.publish()
    mirror.put(1, '{"relationshipId":1,"n":3}')
    # Keeping next to nothing: what was current at the cutoff (the second publish) and the
    # newest stay, and the version valid between them; the current row always does.
    latest = mirror.publish(keep=timedelta(microseconds=1))
    _, con = snapshots.open_current(mirror.snapshots)
    with con:
        kept = feed_queries.publishes(con)
        closed = con.execute('SELECT count(*) FROM history."pairings"').fetchall()[0][0]
        with pytest.raises(feed.HistoryGone):
            feed.read_page(
                con, STREAM, PAIRINGS.sql, feed.decode_token(old_token, feed.mirror_id(con))
            )
        with pytest.raises(BeforeHistory):
            publish_at(kept, kept[0].published_at - timedelta(seconds=1))
    assert [publish.version for publish in kept] == [second.version, latest.version]
    assert closed == 1
    loaded, _ = mirror.walk(None)
    assert state_of(loaded) == {"1": '{"relationshipId":1,"n":3}'}


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "a.b", "eyJmIjoxfQ.0000", "eyJmIjoxLCJzIjoicGFpcmluZ3MiLCJhIjoxfQ.bad"],
)
def test_a_token_this_mirror_did_not_issue_is_refused_as_invalid(
    tmp_path: Path, token: str
) -> None:
    mirror = Mirror(tmp_path)
    mirror.put(1, "{}")
    mirror.publish()
    _, con = snapshots.open_current(mirror.snapshots)
    with con, pytest.raises(feed.InvalidToken):
        feed.decode_token(token, feed.mirror_id(con))


def test_the_past_is_rebuilt_on_a_connection_that_reaches_no_file_but_its_own(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    first = mirror.publish()
    mirror.put(2, '{"relationshipId":2}')
    second = mirror.publish()
    with duckdb.connect(str(second.path), read_only=True) as con:
        kept = feed_queries.publishes(con)
    # The history's macro of a snapshot someone rewrote: it reads the host's files.
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the past", encoding="utf-8")
    with duckdb.connect(str(second.path)) as con:
        con.execute(
            f"CREATE OR REPLACE MACRO pairings_at(v) AS TABLE SELECT * FROM read_text('{secret}')"
        )
    out = tmp_path / "rebuilt.duckdb"

    with pytest.raises(duckdb.PermissionException, match="disabled by config"):
        rebuild(second.path, publish_at(kept, first.version), out)
    assert not out.exists()


@pytest.mark.parametrize("first_publish", [True, False], ids=["first", "after-one-of-its-release"])
def test_a_table_added_to_the_warehouse_by_hand_stays_out_of_the_snapshot(
    tmp_path: Path, first_publish: bool
) -> None:
    """Whether or not a snapshot of this release is current (a publisher then checks its copy
    against that snapshot's catalog first), what no publish makes stays out."""
    mirror = Mirror(tmp_path)
    mirror.put(1, '{"relationshipId":1}')
    if not first_publish:
        mirror.publish()
        mirror.put(2, '{"relationshipId":2}')
    mirror.con.execute("CREATE TABLE scratch AS SELECT 42 AS answer")
    mirror.con.execute("CREATE VIEW scratch_view AS SELECT * FROM scratch")

    published = mirror.publish()

    with guard.open_locked(published.path) as con:
        guard.check_definitions(con, published.path.name)  # what readers accept
        names = {row[0] for row in con.execute("SELECT name FROM (SHOW ALL TABLES)").fetchall()}
    assert "pairings" in names and not {"scratch", "scratch_view"} & names
    assert mirror.con.execute("SELECT answer FROM scratch").fetchall() == [(42,)]


def test_a_catalog_passes_the_publisher_s_shortcut_only_when_it_equals_the_published_one() -> None:
    """``published`` spares the publisher the expected catalog only for an exact match: a
    database with anything else is checked in full, and a reader passes no ``published``."""
    with duckdb.connect() as con:
        con.execute("CREATE VIEW stray AS SELECT 1 AS one")
        found = guard.definitions_of(con)
        guard.check_definitions(con, "copy", published=found)
        assert guard.drop_strays(con, published=found) == []

        for published in (None, {}, {**found, ("view", "main", "other"): "SELECT 2"}):
            with pytest.raises(guard.SnapshotRefused, match="no publish makes"):
                guard.check_definitions(con, "copy", published=published)
        assert guard.drop_strays(con, published={}) == ["main.stray"]


def test_the_feed_reads_its_publish_s_records_by_row_exactly_as_the_as_of_macro_gives_them(
    tmp_path: Path,
) -> None:
    """The large streams find the current records of a feed page by row first (section
    ``feed_records_now``): for keys that are live, deleted, not found or never seen, they
    give what their ``<stream>_as_of(NULL)`` macro gives."""
    mirror = Mirror(tmp_path)
    mirror.con.execute(
        "INSERT INTO digital_assets BY NAME SELECT 'DA-' || i AS asset_id, "
        "'{\"assetId\":\"DA-' || i || '\"}' AS record, now() AS synced_at, "
        "CASE WHEN i % 3 = 0 THEN now() END AS deleted_at FROM range(12) AS t(i)"
    )
    mirror.con.execute(
        "INSERT INTO lead_details BY NAME SELECT 'L' || i AS id, i % 4 <> 0 AS found, "
        "CASE WHEN i % 4 <> 0 THEN '{\"id\":\"L' || i || '\"}' END AS record, "
        "now() AS synced_at FROM range(12) AS t(i)"
    )
    snapshot = mirror.publish()
    asked = [
        (DIGITAL_ASSETS, [f"DA-{i}" for i in range(14)]),
        (LEADS, [f"L{i}" for i in range(14)]),
    ]
    with_section = [s for s in STREAMS if stream_section(s.sql, "feed_records_now")]
    assert [stream for stream, _ in asked] == with_section  # every such stream is checked
    for stream, keys in asked:
        with duckdb.connect(str(snapshot.path), read_only=True) as con:
            quick = stream_section(stream.sql, "feed_records_now")
            by_macro = fill(section("history_feed", "records"), records=f"{stream.sql}_as_of")
            got = con.execute(quick, {"keys": keys}).fetchall()
            want = con.execute(by_macro, {"pin": None, "keys": keys}).fetchall()
        walked, _ = mirror.walk(None, limit=5, stream=stream)

        assert sorted(got) == sorted(want)
        assert 0 < len(want) < len(keys)  # some keys have no record
        assert state_of(walked) == dict(want)


def test_a_feed_entry_writes_its_members_in_order_its_key_escaped_and_its_record_verbatim() -> None:
    """Entries of one publish share their version and time, written once per publish: each
    entry still carries its own, in the contract's member order."""
    first = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    entries = [
        feed_entries.Change("upsert", 'DA-"1\u00e9', "v1", first, b'{"b": 1,  "a":[]}'),
        feed_entries.Change("upsert", "DA-2", "v1", first, b"{}"),
        feed_entries.Change("delete", "DA-3", "v2", first + timedelta(days=1), None),
    ]
    written = [entry.json_bytes() for entry in entries]

    assert feed_entries.write_entries(entries, b"\n") == b"\n".join(
        written
    )  # a page's, copied once
    assert feed_entries.write_entries([], b",") == b""
    assert written[0].endswith(b',"record":{"b": 1,  "a":[]}}')
    assert [json.loads(line) for line in written] == [
        {
            "op": "upsert", "key": 'DA-"1\u00e9', "version": "v1",
            "changedAt": "2026-01-02T03:04:05.678Z", "record": {"b": 1, "a": []},
        },
        {
            "op": "upsert", "key": "DA-2", "version": "v1",
            "changedAt": "2026-01-02T03:04:05.678Z", "record": {},
        },
        {
            "op": "delete", "key": "DA-3", "version": "v2",
            "changedAt": "2026-01-03T03:04:05.678Z", "record": None,
        },
    ]  # fmt: skip
    assert all(list(json.loads(line)) == ["op", "key", "version", "changedAt", "record"]
               for line in written)  # fmt: skip
