"""ETags from content (serve/validators.py): an answer that did not change keeps its ETag across
publishes and revalidates to 304 at the later snapshot; one that changed answers 200 with a new
ETag. Through ``ductwork sync`` and ``ductwork serve`` as operators run them, with and without
gzip."""

from __future__ import annotations

from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from itertools import pairwise
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ductwork.contract import paths
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from sandbox.server import SandboxHandle
from serve.validators import content_etag, names_body, pieces_etag, with_gzip
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ductwork, sync_env
from tests.helpers.serve_process import start_serve, stop_serve
from tests.helpers.sync import first_answer_of_a_new_snapshot, mutate

UNIT_TYPES = ("indoor-units", "outdoor-units", "ventilation", "accessories")


def test_if_none_match_names_a_body_weakly_in_either_coding_or_by_star() -> None:
    etag = content_etag(b'{"data": 1}')
    core = etag.decode()
    assert names_body(core, etag)
    assert names_body(f"W/{core}", etag)
    assert names_body(with_gzip(etag).decode(), etag)
    assert names_body(f'"other", {core}', etag)
    assert names_body("*", etag)
    assert not names_body('"other"', etag)
    assert not names_body(None, etag) and not names_body("", etag)
    assert not names_body(content_etag(b'{"data": 2}').decode(), etag)
    assert with_gzip(with_gzip(etag)) == with_gzip(etag)


def test_a_body_in_pieces_has_the_etag_of_its_joined_bytes() -> None:
    """A feed page sliced from a change file is hashed piece by piece, never joined: its
    ETag must be the one its joined bytes would have."""
    body = b'{"next":"T","changes":[' + b'{"key":"k"},' * 500 + b'{"key":"z"}]}'
    for cut in ([], [1], [23], [23, 5000], [0, 23, len(body)]):
        bounds = [0, *cut, len(body)]
        pieces = [memoryview(body)[start:end] for start, end in pairwise(bounds)]
        assert pieces_etag(pieces) == content_etag(body), cut
    assert pieces_etag([b"a", b"b"]) != content_etag(b"ba")


@pytest.fixture
def changing_upstream(object_store: ObjectStoreServer) -> Iterator[SandboxHandle]:
    """A sandbox of its own, changed between the two syncs."""
    with object_store.sandbox(4343) as handle:
        yield handle


def answer_paths(base: str, key: str) -> tuple[list[str], list[str]]:
    """Lookups (a hundred SKUs, both ways, and twenty leads' details) and list pages (small
    pages of the unit types, pages of products, digital assets and leads) to revalidate."""
    auth = {"Authorization": f"Bearer {key}"}
    listed = httpx.get(f"{base}/products/v2.0/indoor-units?count=100", headers=auth).json()
    lookups = []
    for record in listed["data"]:
        sku = quote(record["sku"], safe="")
        lookups += [f"/products/v2.0/units/{sku}", f"/products/v2.0/indoor-units/{sku}"]
    leads = httpx.get(f"{base}{paths.LEADS}?count=20", headers=auth).json()["data"]
    lookups += [f"{paths.LEADS}/{quote(lead['Id'], safe='')}" for lead in leads]
    pages = [
        f"/products/v2.0/{slug}?count=5&page={page}" for slug in UNIT_TYPES for page in range(1, 21)
    ]
    pages += [f"/products/v2.0/products?count=50&page={page}" for page in range(1, 5)]
    pages += [f"/warehouse/v1.0/digital-assets?count=100&page={page}" for page in range(1, 5)]
    pages += [f"{paths.LEADS}?count=50"]  # leads do not change here
    return lookups, pages


def check_last_modified(
    client: httpx.Client, base: str, before: dict, unchanged: list[str]
) -> None:
    """Each lookup's ``Last-Modified`` is when its content was first served: kept when it did
    not change, later when it did, and ``If-Modified-Since`` (without ``If-None-Match``, which
    wins) answers by it."""
    lookups = [
        path
        for path, coding in before
        if coding == "identity" and ("/units/" in path or path.startswith(f"{paths.LEADS}/"))
    ]
    assert any(path.startswith(f"{paths.LEADS}/") for path in lookups)
    for path in lookups:
        stamp = before[(path, "identity")].headers["last-modified"]
        answer = client.get(base + path, headers={"If-Modified-Since": stamp})
        if path in unchanged:
            assert answer.status_code == 304, path
        else:
            assert answer.status_code == 200, path
            assert parsedate_to_datetime(answer.headers["last-modified"]) > (
                parsedate_to_datetime(stamp)
            )
        overruled = {"If-Modified-Since": stamp, "If-None-Match": '"another body"'}
        assert client.get(base + path, headers=overruled).status_code == 200


def test_unchanged_answers_revalidate_to_304_after_a_publish_and_changed_ones_get_a_new_etag(
    changing_upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    env = sync_env(tmp_path, changing_upstream, object_store, UPSTREAM_KEY)
    first_sync = ductwork("sync", env=env)
    assert first_sync.returncode == 0, first_sync.stdout[-2000:] + first_sync.stderr[-2000:]
    key = KeyFile(HomeSettings(home=tmp_path).keys_path).create("etags", ["all"])
    api = start_serve(tmp_path, workers=1)
    try:
        lookups, pages = answer_paths(api.url, key)
        codings = {"identity": {"Accept-Encoding": "identity"}, "gzip": {"Accept-Encoding": "gzip"}}
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            before = {
                (path, coding): client.get(api.url + path, headers=extra)
                for path in lookups + pages
                for coding, extra in codings.items()
            }
            old_version = before[(pages[0], "gzip")].headers["x-snapshot-version"]
            assert before[(pages[0], "gzip")].headers["etag"].endswith('-gzip"')

            # About one product in fifteen changes: some of the sampled lookups and small pages
            # change, some do not. An asset added changes every page's totals.
            mutate(changing_upstream, products_changed=200, assets_added=30)
            second_sync = ductwork("sync", env=env)
            assert second_sync.returncode == 0, second_sync.stderr[-2000:]
            first_answer_of_a_new_snapshot(api.url + pages[0], client.headers, old_version)

            changed, unchanged = [], []
            for (path, coding), old in before.items():
                headers = {**codings[coding], "If-None-Match": old.headers["etag"]}
                again = client.get(api.url + path, headers=headers)
                assert again.headers["x-snapshot-version"] != old_version  # the new snapshot
                fresh = client.get(api.url + path, headers=codings[coding])
                if fresh.content == old.content:
                    assert again.status_code == 304, (path, coding)
                    assert again.headers["etag"] == old.headers["etag"] == fresh.headers["etag"]
                    unchanged.append(path)
                else:
                    assert again.status_code == 200 and again.content == fresh.content
                    assert again.headers["etag"] == fresh.headers["etag"] != old.headers["etag"]
                    changed.append(path)
            check_last_modified(client, api.url, before, unchanged)
    finally:
        stop_serve(api)
    # The change touched some of each kind and left some of each kind alone.
    for kind in (lookups, pages):
        assert set(kind) & set(changed) and set(kind) & set(unchanged)
