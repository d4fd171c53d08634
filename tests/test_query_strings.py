"""The read API's query reader gives what ``parse_qsl`` gives, on the queries it splits itself
and on those it hands to ``parse_qsl`` (a unit test: no server is needed to compare them)."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from serve.query_strings import query_pairs

QUERIES = [
    b"",
    b"count=100&page=2",
    b"page=2&count=100&page=3",  # repeated: both kept, in order
    b"count=&page",  # a blank value, a name without "="
    b"&&count=1&",  # empty pieces
    b"=x&a==b",  # no name; a value holding "="
    b"since=ABC-_xyz&limit=1000",
    b"updatedAfter=2024-01-01T00%3A00%3A00Z",  # escaped: parse_qsl decodes it
    b"q=a+b&r=%2B",  # "+" is a space, "%2B" a plus
    b"x=\xe9\xff",  # bytes beyond ASCII, read as Latin-1
    b"a;b=c&d=e",  # ";" is no separator
]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.decode("latin-1") or "empty")
def test_pairs_are_those_parse_qsl_gives(query: bytes) -> None:
    assert query_pairs(query) == parse_qsl(query.decode("latin-1"), keep_blank_values=True)
