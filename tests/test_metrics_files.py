"""``/metrics`` in multiprocess mode reads every worker's metric file; one a worker has just
created is still empty. Unit tests of the collector on a folder of real metric files (a
shortcut: the race with a starting worker is set up, not waited for)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector

from serve.observability import SettledFilesCollector


def _folder_with_a_worker_starting(folder: Path) -> None:
    """One worker's counter file with a count of 3, and another worker's file just created."""
    written = MmapedDict(str(folder / "counter_101.db"))
    written.write_value(mmap_key("answers_total", "answers_total", [], [], "answers"), 3.0, 0.0)
    written.close()
    (folder / "counter_102.db").touch()


def test_metrics_pass_over_a_worker_file_not_yet_written(tmp_path: Path) -> None:
    _folder_with_a_worker_starting(tmp_path)
    registry = CollectorRegistry()
    SettledFilesCollector(registry, path=str(tmp_path))
    assert b"answers_total 3.0" in generate_latest(registry)


def test_the_library_collector_fails_on_the_same_folder(tmp_path: Path) -> None:
    """What the collector above passes over: the library's own fails on the empty file."""
    _folder_with_a_worker_starting(tmp_path)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    with pytest.raises(struct.error):
        generate_latest(registry)
