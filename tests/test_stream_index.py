"""Position-range reads of the large lists: chunked, cached, and equal to a direct read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb

from serve.stream_index import CHUNK, ChunkCache, SnapshotReader, load_list


def numbered_snapshot(path: Path, rows: int) -> SnapshotReader:
    """A base table stored in reverse order, numbered forwards: position n points at the last
    row but n, whose record says n."""
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE digital_assets AS "
            "SELECT '{\"n\":' || (? - 1 - range) || '}' AS record FROM range(?)",
            [rows, rows],
        )
        con.execute(
            "CREATE TABLE serving_digital_assets AS SELECT range::BIGINT AS pos, "
            "range * 10 AS key_us, ? - 1 - range AS row_id FROM range(?)",
            [rows, rows],
        )
    return SnapshotReader(duckdb.connect(str(path), read_only=True))


def test_ranges_across_chunk_edges_read_the_records_their_positions_point_at(
    tmp_path: Path,
) -> None:
    total = 2 * CHUNK + 500
    listing = load_list(
        numbered_snapshot(tmp_path / "s.duckdb", total), "serving_digital_assets",
        "digital_assets", with_ids=False,
    )  # fmt: skip
    assert listing.cached_records(0, 100) is None  # nothing read yet
    ranges = [(0, 100), (CHUNK - 50, CHUNK + 50), (0, total), (total - 1, total), (7, 7)]
    for start, end in ranges:
        expected = [f'{{"n":{n}}}'.encode() for n in range(start, end)]
        assert listing.records(start, end) == expected
        assert listing.cached_records(start, end) == expected  # now served from the cache
        assert asyncio.run(listing.page(start, end)) == expected


def test_the_chunk_cache_drops_the_least_recently_used_chunks_beyond_its_limit() -> None:
    cache = ChunkCache(limit_bytes=250)
    for index in range(4):
        cache.put(index, [b"x" * 100])
    assert cache.get(0) is None and cache.get(1) is None
    assert cache.get(2) == [b"x" * 100] and cache.get(3) == [b"x" * 100]
    cache.get(2)  # used last: the next put drops chunk 3, not chunk 2
    cache.put(4, [b"y" * 100])
    assert cache.get(3) is None and cache.get(2) is not None and cache.get(4) is not None
