"""Record files (serve/record_file.py): a large list's records in one mapped file, a page one
slice; written once per snapshot file, shared by every worker of the host, and never removed
while their snapshot is current or served (the past's included: through ``ductwork serve``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from ductwork import snapshots
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.snapshots.record_files import record_file_name, record_file_names
from ductwork.streams.registry import DIGITAL_ASSETS
from sandbox.local_server import serving
from serve import record_file
from serve.app import create_app
from serve.live_snapshot import load_state
from tests.conftest import UNLIMITED, home_with_published_snapshot
from tests.helpers.history import home_with_publishes, snapshot_file
from tests.helpers.serve_process import serving_process
from tests.helpers.sync import first_answer_of_a_new_snapshot, publish_altered_copy

ASSETS = "/warehouse/v1.0/digital-assets"
AT = "/_ductwork/v1/at"
RECORDS = [f'{{"n":{i},"text":"{"é" * (i % 7)}"}}'.encode() for i in range(2500)]


def batches_of(records: list[bytes], size: int) -> Iterator[pa.Array]:
    """String arrays of ``records`` with their commas; each a slice of a larger array, as
    DuckDB's batches can be."""
    texts = [r.decode() + "," for r in records]
    for at in range(0, len(texts), size):
        yield pa.array(["padding", *texts[at : at + size]]).slice(1)


def never_read() -> Iterator[pa.Array]:
    raise AssertionError("the file existed: nothing should be read")
    yield  # pragma: no cover


def test_every_range_is_the_records_joined_by_commas(tmp_path: Path) -> None:
    found = record_file.open_or_write(".records-a", batches_of(RECORDS, 999), tmp_path)
    assert len(found) == len(RECORDS)
    for start, end in [(0, 100), (998, 1001), (0, 2500), (2400, 2600), (7, 7), (3000, 3100)]:
        assert found.joined(start, end) == b",".join(RECORDS[start:end]), (start, end)


def test_a_written_file_is_mapped_again_without_reading_the_records(tmp_path: Path) -> None:
    first = record_file.open_or_write(".records-a", batches_of(RECORDS, 500), tmp_path)
    again = record_file.open_or_write(".records-a", never_read(), tmp_path)
    assert again.joined(0, 2500) == first.joined(0, 2500)


def test_a_new_file_removes_the_others_while_a_mapped_one_keeps_answering(tmp_path: Path) -> None:
    old = record_file.open_or_write(".records-old", batches_of(RECORDS, 500), tmp_path)
    new = record_file.open_or_write(".records-new", batches_of(RECORDS[:10], 500), tmp_path)
    assert sorted(p.name for p in tmp_path.glob(".records-*")) == [".records-new"]
    assert old.joined(2000, 2002) == b",".join(RECORDS[2000:2002])
    assert len(new) == 10
    assert not list(tmp_path.glob("*.partial"))
    assert (tmp_path / ".records.lock").stat().st_mode & 0o077 == 0  # private to its owner


def test_a_new_file_keeps_the_files_of_its_snapshots_other_lists(tmp_path: Path) -> None:
    record_file.open_or_write(".records-old", batches_of(RECORDS, 500), tmp_path)
    leads = record_file.open_or_write(".records-leads", batches_of(RECORDS[:20], 500), tmp_path)
    siblings = {".records-leads", ".records-assets"}
    record_file.open_or_write(".records-assets", batches_of(RECORDS, 500), tmp_path, siblings)
    assert sorted(p.name for p in tmp_path.glob(".records-*")) == [
        ".records-assets",
        ".records-leads",
    ]
    again = record_file.open_or_write(".records-leads", never_read(), tmp_path, siblings)
    assert again.joined(0, 20) == leads.joined(0, 20)


def test_an_empty_list_has_an_empty_file_of_no_records(tmp_path: Path) -> None:
    found = record_file.open_or_write(".records-empty", iter([]), tmp_path)
    assert len(found) == 0 and found.joined(0, 100) == b""


def test_a_snapshot_changed_in_place_gets_a_file_of_its_own(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot-x.duckdb"
    snapshot.write_bytes(b"one")
    before = record_file_name(snapshot, "serving_digital_assets")
    snapshot.write_bytes(b"other")  # a new size, whatever the clock's resolution
    assert record_file_name(snapshot, "serving_digital_assets") != before
    assert record_file_name(snapshot, "serving_leads") != before


def test_the_mapped_digital_assets_are_the_records_the_snapshot_holds(synced_home: Path) -> None:
    published = snapshots.current(HomeSettings(home=synced_home).snapshots_dir)
    assert published is not None
    state = load_state(published)
    try:
        listing = state.lists[DIGITAL_ASSETS.name]
        assert listing.whole is not None and len(listing.whole) == len(listing) > 0
        for start, end in [(0, 100), (950, 1050), (len(listing) - 5, len(listing) + 5)]:
            read = listing.records(start, min(end, len(listing)))  # through the range query
            assert asyncio.run(listing.joined(start, end)) == b",".join(read)
    finally:
        state.close()


@pytest.fixture
def served_copy(synced_home: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    with serving(create_app(HomeSettings(home=home), UNLIMITED)) as url:
        yield url, home


def test_a_new_snapshot_is_served_from_its_own_record_file(
    served_copy: tuple[str, Path], tmp_path: Path
) -> None:
    url, home = served_copy
    settings = HomeSettings(home=home)
    key = KeyFile(settings.keys_path).create("t", ["all"])
    headers = {"Authorization": f"Bearer {key}"}
    page = f"{url}/warehouse/v1.0/digital-assets?count=5"
    before = httpx.get(page, headers=headers)
    assert before.status_code == 200
    publish_altered_copy(
        settings.snapshots_dir,
        "UPDATE digital_assets SET record = '{\"changed\":true}' WHERE rowid = "
        "(SELECT row_id FROM serving_digital_assets WHERE pos = 0)",
    )
    after = first_answer_of_a_new_snapshot(page, headers, before.headers["x-snapshot-version"])
    assert after.json()["data"][0] == {"changed": True}
    assert after.json()["data"][1:] == before.json()["data"][1:]


def test_answering_the_past_keeps_the_record_files_of_the_current_snapshot_and_those_in_use(
    synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    versions = home_with_publishes(synced_home, home, 2)
    target = HomeSettings(home=home).snapshots_dir
    key = KeyFile(HomeSettings(home=home).keys_path).create("reader", ["all"])
    headers = {"Authorization": f"Bearer {key}"}

    def record_files(version: str) -> dict[str, int]:
        """The record files of that version's snapshot, by name, with their inodes."""
        names = record_file_names(snapshot_file(home, version))
        return {name: (target / name).stat().st_ino for name in names if (target / name).exists()}

    with serving_process(home, 1) as api, httpx.Client(headers=headers, timeout=60) as client:
        present = client.get(f"{api.url}{ASSETS}")
        assert present.headers["x-snapshot-version"] == versions[-1]
        current = record_files(versions[-1])
        assert current
        for version in versions[:2]:
            past = client.get(f"{api.url}{AT}/{version}{ASSETS}")
            assert past.status_code == 200 and past.headers["x-snapshot-version"] == version
        # Both past snapshots are served by the worker (it keeps two): the second's record
        # file was written without removing the first's, nor the current one's.
        assert record_files(versions[0]) and record_files(versions[1])
        assert client.get(f"{api.url}{ASSETS}").status_code == 200
        assert record_files(versions[-1]) == current  # the same files, never rewritten
