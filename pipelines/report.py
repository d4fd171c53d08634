"""``ductwork report``: one self-contained HTML page of charts for operators and analysts.

Per stream: rows over time, freshness, and the last runs' request and retry counts, all read
from the materialisation metadata in the Dagster instance; plus the lead funnel from the
current snapshot. plotly draws the charts; its JavaScript is embedded once, inline, so the page
works offline.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ductwork import file_modes, output_files, snapshots
from ductwork.streams.registry import LEADS
from warehouse_sql import stream_section

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


def funnel_figure(statuses: list[tuple[str, int]]) -> go.Figure:
    """Leads by current status, largest first."""
    figure = go.Figure(go.Funnel(y=[s for s, _ in statuses], x=[n for _, n in statuses]))
    figure.update_layout(title="Lead funnel: leads by current status", height=420)
    return figure


def render(
    streams: dict[str, list[Materialization]],
    statuses: list[tuple[str, int]],
    version: str | None,
    now: datetime,
) -> str:
    """The whole page; the first chart carries plotly.js inline, the others reuse it."""
    figures: list[go.Figure] = []
    if streams:
        figures.append(freshness_figure(streams, now))
        figures += [stream_figure(name, points) for name, points in streams.items()]
    if statuses:
        figures.append(funnel_figure(statuses))
    charts = [
        figure.to_html(full_html=False, include_plotlyjs=index == 0)
        for index, figure in enumerate(figures)
    ]
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


def lead_funnel(snapshots_dir: Path) -> tuple[str | None, list[tuple[str, int]]]:
    """The current snapshot's version and its leads by status (None, [] before a publish)."""
    try:
        snap, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError:
        return None, []
    with con:
        return snap.version, [
            (s, n) for s, n in con.execute(stream_section(LEADS.sql, "funnel")).fetchall()
        ]


def write_report(dagster_home: Path, snapshots_dir: Path, out: Path, force: bool = False) -> int:
    """Write the report page to ``out``, a new file unless ``force`` lets it replace a regular
    one (``ductwork.output_files``); returns the exit code."""
    file_modes.current().make_private_dir(out.parent)
    with output_files.new_file(out, force) as sink:
        streams: dict[str, list[Materialization]] = {}
        if dagster_home.is_dir():
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                streams = stream_history(instance)
        version, statuses = lead_funnel(snapshots_dir)
        sink.write(render(streams, statuses, version, datetime.now(UTC)).encode("utf-8"))
    print(f"wrote {out} ({len(streams)} streams)")
    return 0
