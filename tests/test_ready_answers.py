"""The short path's ready answers stay within their byte limit, least recently used dropped
first (unit tests of the cache alone: a shortcut, the serving tests cover its use)."""

from __future__ import annotations

from serve.ready_answers import ENTRY_OVERHEAD_BYTES, Ready, ReadyAnswers


def test_the_least_recently_used_answers_go_first_once_over_the_limit() -> None:
    body = b"x" * 1000
    kept = ReadyAnswers(limit_bytes=3 * (ENTRY_OVERHEAD_BYTES + 1200))
    for page in range(3):
        kept.put((f"/p/{page}", b""), Ready(body, b'"e"'))
    assert kept.get(("/p/0", b"")) is not None  # now the most recently used
    kept.put(("/p/3", b""), Ready(body, b'"e"'))
    assert kept.get(("/p/1", b"")) is None
    assert kept.get(("/p/0", b"")) is not None and kept.get(("/p/3", b"")) is not None
    assert kept.size_bytes <= kept.limit_bytes


def test_an_answer_larger_than_the_whole_limit_is_not_kept() -> None:
    kept = ReadyAnswers(limit_bytes=4096)
    kept.put(("/big", b"count=1000"), Ready(b"x" * 8192, b'"e"'))
    assert len(kept) == 0 and kept.size_bytes == 0


def test_an_etag_without_its_body_costs_only_its_key_and_bookkeeping() -> None:
    kept = ReadyAnswers()
    kept.put(("/warehouse/v1.0/digital-assets", b"count=100&page=7"), Ready(None, b'"e"'))
    assert ENTRY_OVERHEAD_BYTES < kept.size_bytes < ENTRY_OVERHEAD_BYTES + 200
