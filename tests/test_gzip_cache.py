"""Gzip answers compressed once per snapshot, path and query (serve/gzip_cache.py): bounded,
never an earlier snapshot's, and the same bytes as a fresh compression."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, ServeSettings
from sandbox.local_server import serving
from serve.app import create_app
from serve.gzip_cache import CompressedAnswers, CompressWhenAsked
from tests.conftest import home_with_published_snapshot
from tests.helpers.sync import first_answer_of_a_new_snapshot, publish_altered_copy

UNITS = "/products/v2.0/indoor-units?count=100"


def test_the_cache_keeps_the_most_recently_used_answers_within_its_size() -> None:
    cache = CompressedAnswers(limit_bytes=1000)
    for n in range(30):
        cache.put((b"v1", "/p", str(n).encode()), bytes(100))
        cache.get((b"v1", "/p", b"21"))  # kept in use
        assert cache.size_bytes <= 1000
    assert len(cache) == 10
    assert cache.get((b"v1", "/p", b"21")) is not None
    assert cache.get((b"v1", "/p", b"29")) is not None
    assert cache.get((b"v1", "/p", b"0")) is None
    cache.put((b"v1", "/big", b""), bytes(1001))  # larger than the whole cache: not kept
    assert cache.get((b"v1", "/big", b"")) is None and cache.size_bytes <= 1000


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
    assert first.headers["vary"] == "Accept-Encoding"
    answers = compressing_layer(app).answers
    assert len(answers) == 1
    assert httpx.get(url + UNITS, headers=zipped).content == first.content
    assert len(answers) == 1  # the second came from the cache

    publish_altered_copy(
        settings.snapshots_dir,
        "DELETE FROM units WHERE sku = "
        "(SELECT min(sku) FROM units WHERE unit_type = 'indoor-units')",
    )
    after = first_answer_of_a_new_snapshot(url + UNITS, zipped, first.headers["etag"])
    fresh = httpx.get(url + UNITS, headers=plain)
    assert fresh.headers["etag"] == after.headers["etag"]
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
