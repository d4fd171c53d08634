"""Retention per stream, on real DuckDB files: a stream of personal data kept shorter than the
rest loses its older versions and logged changes at publish, records its horizon, and its feed
and past refuse what lies before it while every other stream keeps the default history.

Unit tests of the history's core, as ``tests/test_history_semantics.py`` (rows written into a
warehouse directly, published with ``snapshots.publish``). Through ``ductwork sync`` as users
run it: ``tests/test_history_days_per_stream.py``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ductwork import snapshots
from ductwork.history import feed, feed_queries
from ductwork.history.past import BeforeHistory, publish_at
from ductwork.settings import HistorySettings
from ductwork.streams.registry import CONTRACTORS, PAIRINGS, STREAMS
from tests.test_history_semantics import Mirror, state_of

KEEP = timedelta(days=90)
NEXT_TO_NOTHING = {CONTRACTORS.name: timedelta(microseconds=1)}


def _publish(mirror: Mirror, keep: timedelta = KEEP, **shorter: timedelta) -> snapshots.Snapshot:
    return snapshots.publish(mirror.con, mirror.snapshots, keep, shorter).snapshot


def _scalar(mirror: Mirror, query: str) -> object:
    _, con = snapshots.open_current(mirror.snapshots)
    with con:
        return con.execute(query).fetchall()[0][0]


def test_a_stream_kept_shorter_loses_its_old_versions_and_changes_and_no_other_stream_does(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    for n in (1, 2, 3):
        mirror.put(1, f'{{"relationshipId":1,"n":{n}}}')
        mirror.put_contractor("c1", f'{{"contractorId":"c1","n":{n}}}')
        if n == 1:
            first = _publish(mirror)
            _, contractors_token = mirror.walk(None, stream=CONTRACTORS)
            _, pairings_token = mirror.walk(None)
        elif n == 2:
            second = _publish(mirror)
            _, later_token = mirror.walk(None, stream=CONTRACTORS)
        else:
            _publish(mirror, **NEXT_TO_NOTHING)
    # The contractors keep what was current at their cutoff (the second publish) onwards: the
    # version valid from it to the third; the pairings keep both closed versions.
    assert _scalar(mirror, "SELECT count(*) FROM history.contractors") == 1
    assert _scalar(mirror, "SELECT count(*) FROM history.pairings") == 2
    assert _scalar(mirror, "SELECT list(seq) FROM history.horizons") == [2]
    assert _scalar(
        mirror, "SELECT count(*) FROM history.feed_log WHERE stream = 'contractors' AND seq <= 2"
    ) == 0  # fmt: skip
    assert _scalar(mirror, "SELECT count(*) FROM history.publishes") == 3
    _, con = snapshots.open_current(mirror.snapshots)
    with con:
        mirror_name = feed.mirror_id(con)
        kept, horizons = feed_queries.publishes(con), feed.horizons(con)
        with pytest.raises(feed.HistoryGone) as gone:
            feed.read_page(
                con, CONTRACTORS.name, CONTRACTORS.sql,
                feed.decode_token(contractors_token, mirror_name),
            )  # fmt: skip
        assert gone.value.oldest == kept[1].published_at
        own = feed.kept_for(kept, horizons, CONTRACTORS.name)
        with pytest.raises(BeforeHistory):
            publish_at(own, first.version)
        assert publish_at(own, second.version).version == second.version
        assert publish_at(feed.kept_for(kept, horizons, PAIRINGS.name), first.version).seq == 1
    # A token from the horizon on still walks; the pairings' oldest token too.
    changes, _ = mirror.walk(later_token, stream=CONTRACTORS)
    assert state_of(changes) == {"c1": '{"contractorId":"c1","n":3}'}
    changes, _ = mirror.walk(pairings_token)
    assert state_of(changes) == {"1": '{"relationshipId":1,"n":3}'}
    loaded, _ = mirror.walk(None, stream=CONTRACTORS)
    assert state_of(loaded) == {"c1": '{"contractorId":"c1","n":3}'}


def test_a_horizon_only_moves_forward_and_goes_once_the_whole_history_passes_it(
    tmp_path: Path,
) -> None:
    mirror = Mirror(tmp_path)
    for n in (1, 2, 3):
        mirror.put_contractor("c1", f'{{"contractorId":"c1","n":{n}}}')
        _publish(mirror, **NEXT_TO_NOTHING)
    assert _scalar(mirror, "SELECT list(seq) FROM history.horizons") == [2]
    mirror.put_contractor("c1", '{"contractorId":"c1","n":4}')
    _publish(mirror)  # the setting unset again: the horizon stays where it was
    assert _scalar(mirror, "SELECT list(seq) FROM history.horizons") == [2]
    assert _scalar(mirror, "SELECT min(valid_from) FROM history.contractors") == 2
    mirror.put_contractor("c1", '{"contractorId":"c1","n":5}')
    _publish(mirror, **NEXT_TO_NOTHING)
    assert _scalar(mirror, "SELECT list(seq) FROM history.horizons") == [4]
    mirror.put_contractor("c1", '{"contractorId":"c1","n":6}')
    _publish(mirror, keep=timedelta(microseconds=1))  # the whole history passes it
    assert _scalar(mirror, "SELECT count(*) FROM history.horizons") == 0


def test_only_streams_of_personal_data_may_be_kept_shorter_and_each_has_its_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    personal = {stream.name for stream in STREAMS if stream.personal}
    assert personal == {"leads", "contractors"}
    settings = {
        name.removeprefix("history_days_")
        for name in HistorySettings.model_fields
        if name.startswith("history_days_")
    }
    assert settings == personal
    monkeypatch.setenv("DUCTWORK_HISTORY_DAYS", "60")
    monkeypatch.setenv("DUCTWORK_HISTORY_DAYS_LEADS", "30")
    monkeypatch.setenv("DUCTWORK_HISTORY_DAYS_CONTRACTORS", "60")  # not shorter: the default
    assert HistorySettings().stream_keeps() == {"leads": timedelta(days=30)}
