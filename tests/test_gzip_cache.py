"""Gzip answers compressed once per snapshot, path and query (serve/gzip_cache.py): bounded,
never an earlier snapshot's, and the same bytes as a fresh compression."""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import serving
from serve.app import create_app
from serve.gzip_cache import AnswerCache, AnswerKey, CompressWhenAsked, entry_bytes
from tests.conftest import home_with_published_snapshot
from tests.helpers.sync import first_answer_of_a_new_snapshot, publish_altered_copy

UNITS = "/products/v2.0/indoor-units?count=100"
JSON = b"application/json"


def key(n: int | str, path: str = "/p") -> AnswerKey:
    return (b"v1", path, (("page", str(n)),), JSON)


def test_the_cache_keeps_the_most_recently_used_answers_within_its_size() -> None:
    one = entry_bytes(key(10), bytes(100))
    cache = AnswerCache(limit_bytes=10 * one)
    for n in range(10, 40):
        cache.put(key(n), bytes(100))
        cache.get(key(21))  # kept in use
        assert cache.size_bytes <= 10 * one
    assert len(cache) == 10
    assert cache.get(key(21)) is not None
    assert cache.get(key(39)) is not None
    assert cache.get(key(10)) is None
    cache.put(key(0, "/big"), bytes(10 * one))  # larger than the whole cache: not kept
    assert cache.get(key(0, "/big")) is None and cache.size_bytes <= 10 * one


def test_an_entrys_key_counts_against_the_limit_as_much_as_its_answer() -> None:
    cache = AnswerCache(limit_bytes=1 << 20)
    for n in range(200):
        cache.put((b"v1", "/p", (("sku", f"{n}-" + "x" * 10_000),), JSON), bytes(10))
    # Each key is about 10 kB and each answer 10 bytes: the keys alone fill the megabyte.
    assert 90 <= len(cache) <= 100 and cache.size_bytes <= 1 << 20


def test_the_counted_size_covers_the_memory_the_entries_hold() -> None:
    cache = AnswerCache(limit_bytes=1 << 30)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(3_000):
            parameters = (("brand", "b" * (n % 97)), ("count", str(n)))
            key = (b"v1", f"/products/v2.0/units/SKU-{n}", parameters, JSON)
            cache.put(key, bytes(n % 500))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cache) == 3_000
    assert held <= cache.size_bytes, (held, cache.size_bytes)


def compressing_layer(app: Any) -> CompressWhenAsked:
    """The app's gzip layer, from its built middleware stack."""
    layer = app.middleware_stack
    while not isinstance(layer, CompressWhenAsked):
        layer = layer.app
    return layer


@pytest.fixture
def served_copy(synced_home: Path, tmp_path: Path) -> Iterator[tuple[str, Path, Any]]:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    settings = ServeSettings(serve_key_requests_per_second=1_000_000, serve_gzip_cache_mb=1)
    app = create_app(HomeSettings(home=home), settings)
    with serving(app) as url:
        yield url, home, app


def test_padded_queries_of_the_past_share_one_cached_answer_as_the_present_do(
    served_copy: tuple[str, Path, Any],
) -> None:
    url, home, app = served_copy
    key_ = KeyFile(HomeSettings(home=home).keys_path).create("t", ["all"])
    zipped = {"Authorization": f"Bearer {key_}", "Accept-Encoding": "gzip"}
    answers = compressing_layer(app).answers
    with httpx.Client(headers=zipped) as client:
        version = client.get(url + UNITS).headers["x-snapshot-version"]
        assert len(answers) == 1
        at = f"{url}/_ductwork/v1/at/{version}{UNITS}"
        first = client.get(at + "&utm=1")
        assert first.headers["content-encoding"] == "gzip"
        assert first.headers["x-snapshot-version"] == version
        for n in range(20):
            padded = client.get(at + f"&pad{n}=" + "x" * 2_000 + "&utm=2")
            assert padded.content == first.content
        # The same through Accept-Datetime on the spec's own path.
        moment = {"Accept-Datetime": first.headers["memento-datetime"]}
        for n in range(20):
            padded = client.get(url + UNITS + f"&pad{n}=" + "x" * 2_000, headers=moment)
            assert padded.headers["memento-datetime"] == moment["Accept-Datetime"]
        # One answer under /at/, and one on the spec's path: the present's, the same bytes
        # of the same snapshot, whichever way it was asked for.
        assert len(answers) == 2, [key[1:3] for key in answers._answers]
        # A parameter the route reads still makes an answer of its own.
        client.get(at + "&count=50&pad=1")
        assert len(answers) == 3


def test_a_gzip_answer_is_compressed_once_and_never_served_for_a_newer_snapshot(
    served_copy: tuple[str, Path, Any],
) -> None:
    url, home, app = served_copy
    settings = HomeSettings(home=home)
    key = KeyFile(settings.keys_path).create("t", ["all"])
    plain = {"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"}
    zipped = {"Authorization": f"Bearer {key}", "Accept-Encoding": "gzip"}
    first = httpx.get(url + UNITS, headers=zipped)
    assert first.headers["content-encoding"] == "gzip"
    assert first.headers["vary"] == "Accept-Datetime, Accept-Encoding"  # the spec path's, merged
    answers = compressing_layer(app).answers
    assert len(answers) == 1
    assert httpx.get(url + UNITS, headers=zipped).content == first.content
    assert len(answers) == 1  # the second came from the cache

    publish_altered_copy(
        settings.snapshots_dir,
        "DELETE FROM units WHERE sku = "
        "(SELECT min(sku) FROM units WHERE unit_type = 'indoor-units')",
    )
    after = first_answer_of_a_new_snapshot(url + UNITS, zipped, first.headers["x-snapshot-version"])
    fresh = httpx.get(url + UNITS, headers=plain)
    assert after.headers["etag"] == fresh.headers["etag"][:-1] + '-gzip"'  # one body, two codings
    # httpx has decoded the gzip body: it is the new snapshot's page, not the old one's.
    assert after.content == fresh.content
    assert after.json()["data"][0] != first.json()["data"][0]
    assert len(answers) == 2


def test_a_cached_gzip_answer_is_valid_gzip_of_the_plain_answer(
    served_copy: tuple[str, Path, Any],
) -> None:
    url, home, _ = served_copy
    key = KeyFile(HomeSettings(home=home).keys_path).create("t", ["all"])
    auth = {"Authorization": f"Bearer {key}"}
    plain = httpx.get(url + UNITS, headers={**auth, "Accept-Encoding": "identity"}).content
    for _ in range(2):
        with (
            httpx.Client() as client,
            client.stream("GET", url + UNITS, headers={**auth, "Accept-Encoding": "gzip"}) as sent,
        ):
            raw = b"".join(sent.iter_raw())
            assert int(sent.headers["content-length"]) == len(raw) < len(plain)
        assert gzip.decompress(raw) == plain


def test_queries_differing_only_in_what_the_route_ignores_share_one_cached_answer(
    served_copy: tuple[str, Path, Any],
) -> None:
    url, home, app = served_copy
    key_ = KeyFile(HomeSettings(home=home).keys_path).create("t", ["all"])
    zipped = {"Authorization": f"Bearer {key_}", "Accept-Encoding": "gzip"}
    answers = compressing_layer(app).answers
    with httpx.Client(headers=zipped) as client:
        first = client.get(url + UNITS + "&utm=1")
        assert first.headers["content-encoding"] == "gzip"
        for n in range(20):
            padded = client.get(url + UNITS + f"&pad{n}=" + "x" * 2_000 + "&utm=2")
            assert padded.content == first.content
        assert len(answers) == 1
        # A parameter the route reads makes its own answer; repeated, its last value counts.
        fifty = client.get(url + UNITS + "&count=50")
        assert fifty.headers["content-encoding"] == "gzip"
        assert len(answers) == 2, (list(answers._answers), answers.size_bytes, fifty.headers)
        client.get(url + "/products/v2.0/indoor-units?count=7&count=50&junk=1")
        client.get(url + "/products/v2.0/indoor-units?count=50")
        assert len(answers) == 2
