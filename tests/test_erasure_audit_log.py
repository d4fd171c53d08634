"""The erasures' audit log stays one JSON object per line when a write was cut short.

A ``ductwork forget`` killed inside its audit write can leave the first part of its line (Linux
stops a file write between pages for a fatal signal). The erasure is then not logged, so the
command run again logs it: the torn part must not run into that line. Unit tests on the log's
functions and a real file; the kill itself is in ``tests/test_forget.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ductwork.erasure import audit


def _line(erasure_id: str) -> dict[str, object]:
    return audit.entry(erasure_id, "leads", ["ab" * 32], "asked", {"leads": 1}, {}, True)


def test_an_append_after_a_torn_line_cuts_it_and_writes_a_whole_line(tmp_path: Path) -> None:
    audit.append(tmp_path, _line("first"))
    whole = json.dumps(_line("second"), sort_keys=True)
    with audit.audit_path(tmp_path).open("a", encoding="utf-8") as log:
        log.write(whole[: len(whole) // 2])  # the killed run's torn write, no newline

    audit.append(tmp_path, _line("second"))

    lines = audit.audit_path(tmp_path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["erasure"] for line in lines] == ["first", "second"]


def test_a_torn_first_line_is_cut_whole(tmp_path: Path) -> None:
    audit.audit_path(tmp_path).write_text('{"erasure": "cut', encoding="utf-8")

    audit.append(tmp_path, _line("again"))

    text = audit.audit_path(tmp_path).read_text(encoding="utf-8")
    assert [json.loads(line)["erasure"] for line in text.splitlines()] == ["again"]


def test_the_log_read_skips_a_torn_line_and_finds_the_others(tmp_path: Path) -> None:
    """A log torn by an older release, which appended after the tear, is still read."""
    first = json.dumps(_line("first"), sort_keys=True)
    audit.audit_path(tmp_path).write_text(
        first + "\n" + '{"erasure": "torn", "stream"' + "\n" + first.replace("first", "third"),
        encoding="utf-8",
    )

    assert [line["erasure"] for line in audit.entries(tmp_path)] == ["first", "third"]
    assert audit.logged(tmp_path, "third")
    assert not audit.logged(tmp_path, "torn")
