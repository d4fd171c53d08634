"""What a server keeps to answer the changes feed quickly gives the pages the history gives:
a walk's listing kept whole for its later pages (``ductwork.history.walk_listings``), a paged list's
current records found by key in its record file (``serve.key_positions``), and the change files
each publish writes, from which a walk since a publish is sliced
(``ductwork.history.change_files``).

The walks compare ``feed.read_page`` with and without what a server keeps, on a real synced
snapshot and a second publish of it in which digital assets changed and others were deleted;
the rest are unit tests of the pieces, on arrays built here.
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from ductwork import snapshots
from ductwork.history import change_file_names, feed, feed_entries, feed_queries
from ductwork.history.change_files import (
    ENTRIES,
    ChangeFile,
    ChangeFiles,
    ChangeSlice,
    write_change_file,
    write_change_files,
)
from ductwork.history.gzip_chunks import CHUNK_ROWS, deflated_chunks
from ductwork.history.page_columns import ChangeColumns, joined_data, listed_columns
from ductwork.history.walk_listings import Listing, WalkListings
from ductwork.settings import HomeSettings
from ductwork.streams.model import Serving
from ductwork.streams.registry import DIGITAL_ASSETS, STREAMS
from serve.key_positions import MAX_BYTES, KeyPositions, key_positions
from serve.live_snapshot import ServingState, load_state

CHANGED, DELETED = 40, 15  # digital assets changed and deleted between the two publishes


@pytest.fixture(scope="module")
def two_publishes(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the synced folder with a second publish: ``CHANGED`` digital assets with a new
    record, ``DELETED`` others marked deleted."""
    home = tmp_path_factory.mktemp("feed") / "home"
    shutil.copytree(synced_home, home)
    settings = HomeSettings(home=home)
    with duckdb.connect(str(settings.warehouse_path)) as con:
        ids = [row[0] for row in con.execute(
            "SELECT asset_id FROM digital_assets WHERE deleted_at IS NULL ORDER BY asset_id"
        ).fetchall()]  # fmt: skip
        assert len(ids) > CHANGED + DELETED
        changed, deleted = ids[::3][:CHANGED], ids[1::3][:DELETED]
        con.execute(
            "UPDATE digital_assets SET record = json_object('assetId', asset_id, 'changed', true)"
            " WHERE asset_id IN (SELECT unnest(?::VARCHAR[]))",
            [changed],
        )
        con.execute(
            "UPDATE digital_assets SET deleted_at = now() WHERE asset_id IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [deleted],
        )
        snapshots.publish(con, settings.snapshots_dir, timedelta(days=90))
    return home


def walk_pages(
    state: ServingState,
    since: int | None,
    limit: int,
    walks: WalkListings | None,
    change_files: feed.ChangeFileSource | None = None,
    pin: int | None = None,
) -> list[feed.FeedPage]:
    """Every page of the digital assets' walk since publish ``since`` (None: the initial load),
    read plainly (``walks`` and ``change_files`` None) or through what a server keeps of the
    snapshot; ``pin``: the publish the walk is pinned to (None: the snapshot's own)."""
    con, known = state.reader.cursor(), (list(state.publishes), state.mirror)
    listing = state.lists[DIGITAL_ASSETS.name]
    keeps = (walks, listing) if walks is not None else (None, None)
    position = feed.Position(DIGITAL_ASSETS.name, since, pin)
    pages = []
    while True:
        page = feed.read_page(
            con,
            DIGITAL_ASSETS.name,
            DIGITAL_ASSETS.sql,
            position,
            limit,
            known,
            *keeps,
            change_files=change_files,
        )
        pages.append(page)
        if not page.has_more:
            return pages
        position = feed.decode_token(page.next_token, state.mirror)


def written(page: feed.FeedPage) -> tuple:
    """What a page answers: its changes, its token and flags, and its entries as both of the
    feed's formats write them."""
    facts = (list(page.changes), page.next_token, page.has_more, page.pinned)
    return (*facts, page.entries(b","), page.entries(b"\n"))


@pytest.mark.parametrize("initial_load", [True, False], ids=["initial-load", "since-first"])
def test_a_walk_through_what_a_server_keeps_gives_the_pages_the_history_gives(
    two_publishes: Path, initial_load: bool
) -> None:
    published = snapshots.current(HomeSettings(home=two_publishes).snapshots_dir)
    assert published is not None
    state = load_state(published)
    try:
        since = None if initial_load else state.publishes[0].seq
        plain = walk_pages(state, since, 7, None)
        kept = walk_pages(state, since, 7, state.walks)
        assert [written(page) for page in kept] == [written(page) for page in plain]
        # pages after the first were sliced from the listing and written as columns
        assert [page.written is not None for page in kept] == [False] + [True] * (len(kept) - 1)
        assert len(state.walks) == 1  # the later pages sliced the listing kept
        # A listing too large to keep: every page is read alone, as without what is kept.
        small = WalkListings(max_entries=len(kept) * 7 // 2)
        alone = walk_pages(state, since, 7, small)
        assert [written(page) for page in alone] == [written(page) for page in plain]
        assert len(small) == 0 and not any(page.written for page in alone)
        changes = [change for page in plain for change in page.changes]
        # The kept walk's records came from the record file, not the snapshot: its key index
        # answers for every record the walk upserted, with the bytes the history gives.
        upserted = {change.key: change.record for change in changes if change.op == "upsert"}
        by_key = state.lists[DIGITAL_ASSETS.name].records_by_key(list(upserted))
        assert by_key == upserted
        ops = [change.op for change in changes]
        if initial_load:
            assert ops.count("upsert") == len(state.lists[DIGITAL_ASSETS.name]) > 7
        else:
            assert (ops.count("upsert"), ops.count("delete")) == (CHANGED, DELETED)
            assert all(
                json.loads(record or "null")["changed"] is True for record in upserted.values()
            )
    finally:
        state.close()


def publish_again(home: Path, again: int, delete: int) -> None:
    """A further publish of ``home``'s warehouse: ``again`` digital assets changed once more
    (those the second publish changed first), ``delete`` of them deleted, two never changed
    before changed."""
    settings = HomeSettings(home=home)
    with duckdb.connect(str(settings.warehouse_path)) as con:
        changed = [row[0] for row in con.execute(
            "SELECT asset_id FROM digital_assets WHERE deleted_at IS NULL "
            "AND record->>'changed' IS NOT NULL ORDER BY asset_id"
        ).fetchall()]  # fmt: skip
        fresh = [row[0] for row in con.execute(
            "SELECT asset_id FROM digital_assets WHERE deleted_at IS NULL "
            "AND record->>'changed' IS NULL ORDER BY asset_id DESC LIMIT 2"
        ).fetchall()]  # fmt: skip
        assert len(changed) >= again + delete
        con.execute(
            "UPDATE digital_assets SET record = json_object('assetId', asset_id, 'changed', 2)"
            " WHERE asset_id IN (SELECT unnest(?::VARCHAR[]))",
            [changed[:again] + fresh],
        )
        con.execute(
            "UPDATE digital_assets SET deleted_at = now() WHERE asset_id IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [changed[again : again + delete]],
        )
        snapshots.publish(con, settings.snapshots_dir, timedelta(days=90))


@pytest.fixture(scope="module")
def three_publishes(two_publishes: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``two_publishes`` with a third publish (``publish_again``)."""
    home = tmp_path_factory.mktemp("feed-three") / "home"
    shutil.copytree(two_publishes, home)
    publish_again(home, again=10, delete=3)
    return home


@pytest.mark.parametrize("limit", [1, 7, 1000])
def test_a_walk_sliced_from_its_publishs_change_file_gives_the_pages_the_history_gives(
    three_publishes: Path, limit: int, tmp_path: Path
) -> None:
    """Every walk since a publish, pinned to the newest or to the one before it (its own
    change file), sliced from the change file as the history gives it, in both formats."""
    published = snapshots.current(HomeSettings(home=three_publishes).snapshots_dir)
    assert published is not None
    state = load_state(published)
    try:
        kept = [publish.seq for publish in state.publishes]
        assert len(kept) == 3
        for since, pin in [(kept[0], None), (kept[1], None), (kept[0], kept[1])]:
            plain = walk_pages(state, since, limit, None, pin=pin)
            sliced = walk_pages(state, since, limit, state.walks, state.change_files, pin)
            assert [written(page) for page in sliced] == [written(page) for page in plain]
            assert all(isinstance(page.changes, ChangeSlice) for page in sliced)
            assert sum(len(page.changes) for page in plain) > 10
        # Without a change file (a replica's folder), the walk is read from the history.
        alone = walk_pages(state, kept[0], limit, None, ChangeFiles(tmp_path))
        assert [written(page) for page in alone] == [
            written(page) for page in walk_pages(state, kept[0], limit, None)
        ]
        assert not any(isinstance(page.changes, ChangeSlice) for page in alone)
    finally:
        state.close()


def test_a_change_file_carried_on_from_the_last_publishs_is_the_one_the_log_gives(
    three_publishes: Path, tmp_path: Path
) -> None:
    """The third publish wrote its change files from the second's; written again from the
    history's log alone (no earlier file beside it), each is the same."""
    folder = HomeSettings(home=three_publishes).snapshots_dir
    published = snapshots.current(folder)
    assert published is not None
    with duckdb.connect(str(published.path), read_only=True) as con:
        written_counts = write_change_files(con, tmp_path)
        head = feed_queries.publishes(con)[-1]
    assert written_counts[DIGITAL_ASSETS.name] == CHANGED + DELETED + 2
    for stream in STREAMS:
        name = change_file_names.change_file_name(head.version, stream.name)
        carried, logged = ChangeFile.open(folder / name), ChangeFile.open(tmp_path / name)
        assert carried is not None and logged is not None, name
        assert carried.table.equals(logged.table), name


def test_pruning_a_snapshot_removes_its_change_files(two_publishes: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(two_publishes, home)
    folder = HomeSettings(home=home).snapshots_dir
    versions = sorted(p.name for p in folder.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}"))
    assert len(versions) == 2
    names = {p.name for p in folder.glob(f"{change_file_names.CHANGES_PREFIX}*")}
    assert len(names) == 2 * len(STREAMS)
    removed = snapshots.prune(folder, keep=1, grace_s=0)
    current = snapshots.current(folder)
    assert current is not None
    left = {p.name for p in folder.glob(f"{change_file_names.CHANGES_PREFIX}*")}
    assert left == {change_file_names.change_file_name(current.version, s.name) for s in STREAMS}
    assert {p.name for p in removed} >= names - left


def test_every_stream_whose_feed_reads_its_record_file_is_a_list_paged_by_number() -> None:
    """The record file holds a paged list's records, the feed's current records of such a
    stream (the walks above hold them equal for the digital assets): no other stream reads it."""
    reading = [stream.name for stream in STREAMS if stream.feed_key_column is not None]
    assert reading == [s.name for s in STREAMS if s.serving == Serving.PAGED_LIST]
    assert DIGITAL_ASSETS.feed_key_column == "asset_id"


KEYS = ["b", "a\u00e9", "ab", "", "zz-long-key", "a"]


def find(index: KeyPositions, keys: list[str]) -> list[int]:
    """``index``'s positions of ``keys`` as a list."""
    return index.find_column(pa.array(keys, pa.string())).tolist()


def test_key_positions_find_every_key_held_and_none_other() -> None:
    index = key_positions(pa.array(KEYS), pa.array(range(len(KEYS)), pa.int64()))
    assert index is not None
    assert find(index, list(reversed(KEYS))) == list(reversed(range(len(KEYS))))
    # a prefix, a key longer than any held (cut to the width it would equal one), a NUL
    for asked in ["a\u00e9\u00e9", "zz-long-key-and-more", "a\0", "b\0\0", "c", "\0"]:
        assert find(index, ["b", asked]) == [0, -1], asked  # each asked beside a held key
    assert find(index, []) == []


def test_key_positions_are_not_kept_for_keys_with_a_nul_or_beyond_the_memory_bound() -> None:
    positions = pa.array([0, 1], pa.int64())
    assert key_positions(pa.array(["a", "b\0c"]), positions) is None
    wide = "x" * (MAX_BYTES // 2 + 1)
    assert key_positions(pa.array(["a", wide]), positions) is None
    empty = key_positions(pa.array([], pa.string()), pa.array([], pa.int64()))
    assert empty is not None and find(empty, ["a"]) == [-1]


def test_a_listing_slices_strictly_after_a_version_and_key_as_the_statements_compare() -> None:
    rows = sorted((v, k) for v in (3, 5, 8) for k in ("a", "b", "b\u00e9", "c"))
    listing = Listing(np.array([v for v, _ in rows]), pa.array([k for _, k in rows]))
    for after in [(-1, ""), (3, "b"), (3, "c"), (5, ""), (5, "bz"), (8, "c"), (9, "")]:
        expected = [(k, v) for v, k in rows if (v, k) > after]
        assert listing.entries(listing.after(*after), 100) == expected


def test_walk_listings_keep_the_most_recent_up_to_their_bound_and_remember_a_larger_one() -> None:
    def rows(count: int) -> pa.Table:
        return pa.table({"key": [str(i) for i in range(count)], "version": [1] * count})

    walks = WalkListings(max_entries=10)
    reads: list[str] = []

    def read(name: str, count: int) -> Listing | None:
        def reading() -> pa.Table:
            reads.append(name)
            return rows(count)

        return walks.get_or_read((name,), reading)

    read("a", 4), read("b", 4), read("a", 4)  # the second "a" is kept
    read("c", 4)  # 12 entries: the least recently used ("b") goes
    read("a", 4), read("b", 4)
    # larger than the bound: read once, then known as such (its pages are read alone)
    assert read("huge", 11) is None and read("huge", 11) is None
    assert reads == ["a", "b", "c", "b", "huge"]


def test_a_page_held_as_columns_writes_what_its_changes_write_one_by_one() -> None:
    """Unit test, on arrays built here: non-ASCII keys and records, deletes, versions in runs
    and one the publishes do not name (taken as the oldest), both separators."""
    first = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    publishes = {
        1: feed_entries.Publish(1, "v1", first),
        4: feed_entries.Publish(4, "v4", first.replace(day=2)),
    }
    keys = pa.array(["DA-1", "DA-\u00e9", "DA-3", "", "DA-\u2028"])
    records = pa.array([b'{"a": 1}', None, b'{"b":"\xc3\xa9"}', b"[]", None], pa.large_binary())
    columns = ChangeColumns(
        keys, np.array([1, 1, 2, 4, 4]), records, lambda v: publishes.get(v, publishes[1])
    )
    changes = list(columns)
    assert [change.op for change in changes] == ["upsert", "delete", "upsert", "upsert", "delete"]
    assert [change.version for change in changes] == ["v1", "v1", "v1", "v4", "v4"]
    for separator in (b",", b"\n"):
        assert columns.write(separator) == feed_entries.write_entries(changes, separator)
    sliced = ChangeColumns(keys.slice(2), np.array([2, 4, 4]), records.slice(2), columns.publish_of)
    assert sliced.write(b",") == feed_entries.write_entries(changes[2:], b",")  # arrays not from 0
    assert columns[-1] == changes[-1] and columns[1:3] == changes[1:3]


def test_a_listing_with_a_key_json_escapes_is_not_written_as_columns() -> None:
    for key, as_is in [("DA-1", True), ("caf\u00e9 \u2028", True), ('a"b', False),
                       ("a\\b", False), ("a\tb", False), ("a\x00", False)]:  # fmt: skip
        listing = Listing.of(pa.table({"key": ["A", key], "version": [1, 1]}))
        assert listing.keys_as_is is as_is, key
        found = listed_columns(
            listing, 0, 10, EveryKeyHeld(), lambda v: feed_entries.Publish(v, "v", NOW)
        )
        assert (found is not None) is as_is, key


NOW = datetime(2026, 3, 1, tzinfo=UTC)


class EveryKeyHeld:
    """Records that are there (an empty object) for whatever keys are asked."""

    def records_by_key(self, keys: list[str]) -> dict[str, bytes]:
        return dict.fromkeys(keys, b"{}")

    def record_positions(self, keys: pa.Array) -> np.ndarray:
        return np.arange(len(keys), dtype=np.int64)

    def records_at(self, positions: np.ndarray) -> pa.Array:
        return pa.array([b"{}"] * len(positions), pa.large_binary())


def entries_table(count: int) -> pa.Table:
    """``count`` change-file entries of assorted lengths, in (version, key) order."""
    keys = [f"K-{index:05d}" for index in range(count)]
    entries = [
        b'{"op":"upsert","key":"' + key.encode() + b'","record":{"n":"' + b"x" * (i % 97) + b'"}},'
        for i, key in enumerate(keys)
    ]
    return pa.table(
        [pa.array(np.arange(count) // 50, pa.int64()), pa.array(keys), pa.array([False] * count),
         pa.array(entries, pa.large_binary())],
        schema=ENTRIES,
    )  # fmt: skip


def test_a_pages_gzip_from_the_files_chunks_inflates_to_the_page_wherever_it_starts_and_ends(
    tmp_path: Path,
) -> None:
    """Pages starting and ending on and between chunk boundaries, one entry, one chunk, many:
    the gzip assembled from the change file's compressed chunks is the page's body, whether
    the body is given whole or, as the read API gives it, as its head, the entries where the
    file maps them and its end."""
    write_change_file(entries_table(700), tmp_path, "changes")
    opened = ChangeFile.open(tmp_path / "changes")
    assert opened is not None
    head, tail = b'{"next":"T","changes":[', b"]}"
    for start, end in [(0, 700), (0, 64), (0, 65), (1, 128), (63, 129), (64, 128), (64, 640),
                       (100, 101), (130, 192), (5, 699), (699, 700)]:  # fmt: skip
        data = opened.entries.slice(start, end - start)
        entries = memoryview(joined_data(data, 1))
        body = head + bytes(entries) + tail
        assert body == head + b"".join(data.to_pylist())[:-1] + tail
        for pieces in [(body,), (head, entries, tail)]:
            zipped = opened.gzip_of(pieces, len(head), start, end)
            assert gzip.decompress(zipped) == body, (start, end, len(pieces))


def test_each_compressed_chunk_of_a_change_file_is_its_rows_entries() -> None:
    """What the chunks hold is what the entries hold (a text search of the entries finds what
    the file holds); every chunk-th row has one, the others none."""
    table = entries_table(300)
    chunks = deflated_chunks(table.column("entry").combine_chunks())
    entries = table.column("entry").to_pylist()
    for row, chunk in enumerate(chunks.to_pylist()):
        if row % CHUNK_ROWS:
            assert chunk is None
            continue
        inflated = zlib.decompressobj(-zlib.MAX_WBITS).decompress(chunk)
        assert inflated == b"".join(entries[row : row + CHUNK_ROWS])
