"""``ductwork report``: one self-contained HTML page of charts for operators and analysts.

Per stream: rows over time, freshness, and the last runs' request and retry counts, all read
from the materialisation metadata in the Dagster instance; each stream's data age (when it last
synced successfully, as the last publish wrote it); from the current snapshot, the changes each
publish made per stream (its history) and the lead funnel. plotly draws the charts; its
JavaScript is embedded once, inline, so the page works offline. A stream synced once shows its
numbers instead of a chart of one point (whose time axis would span a fraction of a second).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ductwork import file_modes, output_files, snapshots
from ductwork.history.feed_queries import publishes
from ductwork.snapshots import sync_times
from ductwork.streams.registry import LEADS
from warehouse_sql import section, stream_section

RUNS_SHOWN = 10
HISTORY_LIMIT = 200


@dataclass(frozen=True)
class Materialization:
    """One materialisation of a stream, with the numbers the report charts."""

    at: datetime
    rows: float
    requests: float | None
    retries: float | None


def _number(metadata: dict, key: str) -> float | None:
    entry = metadata.get(key)
    value = getattr(entry, "value", None)
    return float(value) if isinstance(value, int | float) else None


def stream_history(instance: dg.DagsterInstance) -> dict[str, list[Materialization]]:
    """Materialisations of every asset that reports a row count, oldest first, per stream."""
    streams: dict[str, list[Materialization]] = {}
    for key in instance.get_asset_keys():
        found = instance.fetch_materializations(key, limit=HISTORY_LIMIT, ascending=False)
        points = []
        for record in found.records:
            event = record.asset_materialization
            if event is None:
                continue
            rows = _number(event.metadata, "dagster/row_count")
            if rows is None:
                continue
            points.append(
                Materialization(
                    at=datetime.fromtimestamp(record.timestamp, UTC),
                    rows=rows,
                    requests=_number(event.metadata, "requests"),
                    retries=_number(event.metadata, "retries"),
                )
            )
        if points:
            streams[key.to_user_string()] = sorted(points, key=lambda p: p.at)
    return dict(sorted(streams.items()))


def freshness_figure(streams: dict[str, list[Materialization]], now: datetime) -> go.Figure:
    """Hours since each stream's last materialisation."""
    names = list(streams)
    hours = [(now - streams[name][-1].at).total_seconds() / 3600 for name in names]
    figure = go.Figure(go.Bar(x=names, y=hours, name="hours since last sync"))
    figure.update_layout(title="Freshness: hours since each stream's last sync", height=380)
    return figure


def stream_figure(name: str, points: list[Materialization]) -> go.Figure:
    """Rows over time, and requests and retries of the last runs, for one stream."""
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=("rows over time", f"last {RUNS_SHOWN} runs")
    )
    figure.add_trace(
        go.Scatter(x=[p.at for p in points], y=[p.rows for p in points], mode="lines+markers",
                   name="rows"),
        row=1, col=1,
    )  # fmt: skip
    recent = points[-RUNS_SHOWN:]
    labels = [p.at.strftime("%m-%d %H:%M:%S") for p in recent]
    figure.add_trace(
        go.Bar(x=labels, y=[p.requests or 0 for p in recent], name="requests"), row=1, col=2
    )
    figure.add_trace(
        go.Bar(x=labels, y=[p.retries or 0 for p in recent], name="retries"), row=1, col=2
    )
    figure.update_layout(title=name, height=360, barmode="group")
    return figure


def one_point(name: str, point: Materialization) -> str:
    """A stream synced once: its numbers, as text."""
    numbers = [f"{point.rows:,.0f} rows"]
    if point.requests is not None:
        numbers.append(f"{point.requests:,.0f} requests")
    if point.retries is not None:
        numbers.append(f"{point.retries:,.0f} retries")
    when = point.at.isoformat(timespec="seconds")
    return f"<h3>{html.escape(name)}</h3><p>One sync so far, at {when}: {', '.join(numbers)}.</p>"


@dataclass(frozen=True)
class PublishChanges:
    """What one publish changed in one stream."""

    seq: int
    at: datetime
    stream: str
    upserts: int
    deletes: int


def changes_figure(changes: list[PublishChanges]) -> go.Figure:
    """Records changed per publish, one bar per stream (publishes as categories: evenly
    spaced, however far apart in time)."""
    labels = {c.seq: f"#{c.seq} {c.at.strftime('%m-%d %H:%M')}" for c in changes}
    figure = go.Figure()
    for stream in sorted({c.stream for c in changes}):
        mine = [c for c in changes if c.stream == stream]
        figure.add_trace(
            go.Bar(
                x=[labels[c.seq] for c in mine],
                y=[c.upserts + c.deletes for c in mine],
                name=stream,
                customdata=[[c.upserts, c.deletes] for c in mine],
                hovertemplate="%{x}: %{customdata[0]} upserts, %{customdata[1]} deletes",
            )
        )
    figure.update_layout(title="Changes per publish, by stream", height=400, barmode="group")
    figure.update_xaxes(type="category")
    return figure


def changes_table(changes: list[PublishChanges]) -> str:
    """The changes of one publish (the only one after the oldest kept), as numbers."""
    rows = "".join(
        f"<tr><td>{html.escape(c.stream)}</td><td>{c.upserts}</td><td>{c.deletes}</td></tr>"
        for c in changes
    )
    when = changes[0].at.isoformat(timespec="seconds")
    return (
        f"<h3>Changes per publish</h3><p>One publish with changes so far, at {when}:</p>"
        f"<table><tr><th>stream</th><th>upserts</th><th>deletes</th></tr>{rows}</table>"
    )


def no_changes_yet(start: tuple[int, datetime] | None, held: list[tuple[str, int]]) -> str:
    """The history before any publish after its first kept one changed a record: what it
    starts from."""
    counts = "".join(f"<tr><td>{html.escape(s)}</td><td>{n}</td></tr>" for s, n in held)
    begins = (
        ""
        if start is None
        else f" at publish #{start[0]} ({start[1].isoformat(timespec='seconds')})"
    )
    return (
        f"<h3>Changes per publish</h3><p>No change logged yet: the history begins{begins} "
        "with these records.</p>"
        f"<table><tr><th>stream</th><th>records</th></tr>{counts}</table>"
    )


def data_age_table(synced: dict[str, datetime], now: datetime) -> str:
    """Each stream's last successful sync and the data's age, as numbers."""
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{at.isoformat(timespec='seconds')}</td>"
        f"<td>{(now - at).total_seconds() / 3600:.2f}</td></tr>"
        for name, at in sorted(synced.items())
    )
    return (
        "<h3>Data age</h3><table><tr><th>stream</th><th>last synced</th><th>hours ago</th></tr>"
        f"{rows}</table>"
    )


def funnel_figure(statuses: list[tuple[str, int]]) -> go.Figure:
    """Leads by current status, largest first."""
    figure = go.Figure(go.Funnel(y=[s for s, _ in statuses], x=[n for _, n in statuses]))
    figure.update_layout(title="Lead funnel: leads by current status", height=420)
    return figure


@dataclass(frozen=True)
class SnapshotFacts:
    """What the report reads from the current snapshot and beside it."""

    version: str | None = None
    statuses: list[tuple[str, int]] = field(default_factory=list)
    changes: list[PublishChanges] = field(default_factory=list)
    synced: dict[str, datetime] = field(default_factory=dict)
    # The oldest publish the history keeps, and its records per stream.
    start: tuple[int, datetime] | None = None
    held: list[tuple[str, int]] = field(default_factory=list)


def render(streams: dict[str, list[Materialization]], facts: SnapshotFacts, now: datetime) -> str:
    """The whole page; the first chart carries plotly.js inline, the others reuse it."""
    parts: list[go.Figure | str] = []
    if facts.synced:
        parts.append(data_age_table(facts.synced, now))
    if streams:
        parts.append(freshness_figure(streams, now))
        for name, points in streams.items():
            parts.append(
                stream_figure(name, points) if len(points) > 1 else one_point(name, points[0])
            )
    if len({c.seq for c in facts.changes}) > 1:
        parts.append(changes_figure(facts.changes))
    elif facts.changes:
        parts.append(changes_table(facts.changes))
    elif facts.held:
        parts.append(no_changes_yet(facts.start, facts.held))
    if facts.statuses:
        parts.append(funnel_figure(facts.statuses))
    charts, inline = [], True
    for part in parts:
        if isinstance(part, str):
            charts.append(part)
        else:
            charts.append(part.to_html(full_html=False, include_plotlyjs=inline))
            inline = False
    version = facts.version
    notes = []
    if not streams:
        notes.append("<p>No materialisations in the Dagster instance yet: run a sync.</p>")
    if version is None:
        notes.append("<p>No published snapshot: the lead funnel needs one.</p>")
    snapshot = html.escape(version) if version else "none"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>ductwork report</title>',
        "<style>body{font-family:sans-serif;margin:2em}</style></head><body>",
        "<h1>ductwork report</h1>",
        f"<p>Generated {now.isoformat(timespec='seconds')}; snapshot {snapshot}; "
        f"{len(streams)} streams.</p>",
        *notes,
        *[f'<div class="chart">{chart}</div>' for chart in charts],
        "</body></html>",
    ])  # fmt: skip


def snapshot_facts(snapshots_dir: Path) -> SnapshotFacts:
    """The current snapshot's version, its leads by status and the changes its history holds,
    and the streams' sync times beside it (nothing before a publish)."""
    synced = sync_times.read(snapshots_dir) if snapshots_dir.is_dir() else {}
    try:
        snap, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError:
        return SnapshotFacts(synced=synced)
    with con:
        statuses = con.execute(stream_section(LEADS.sql, "funnel")).fetchall()
        rows = con.execute(section("history_feed", "changes_per_publish")).fetchall()
        held = con.execute(section("history_feed", "records_per_stream")).fetchall()
        kept = publishes(con)
    changes = [
        PublishChanges(seq, at.astimezone(UTC), stream, upserts, deletes)
        for seq, at, stream, upserts, deletes in rows
    ]
    start = (kept[0].seq, kept[0].published_at) if kept else None
    return SnapshotFacts(
        snap.version, [(s, n) for s, n in statuses], changes, synced, start, list(held)
    )


def write_report(dagster_home: Path, snapshots_dir: Path, out: Path, force: bool = False) -> int:
    """Write the report page to ``out``, a new file unless ``force`` lets it replace a regular
    one (``ductwork.output_files``); returns the exit code."""
    file_modes.current().make_private_dir(out.parent)
    with output_files.new_file(out, force) as sink:
        streams: dict[str, list[Materialization]] = {}
        if dagster_home.is_dir():
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                streams = stream_history(instance)
        facts = snapshot_facts(snapshots_dir)
        sink.write(render(streams, facts, datetime.now(UTC)).encode("utf-8"))
    print(f"wrote {out} ({len(streams)} streams)")
    return 0
