"""``ductwork changes`` and ``ductwork diff``: the mirror's memory, read from the current
snapshot as the read API reads it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ductwork import snapshots
from ductwork.contract.encoding import format_datetime
from ductwork.history import feed, feed_entries, feed_queries
from ductwork.history.diff import StreamDiff, diff_stream
from ductwork.history.past import BadInstant, BeforeHistory, parse_instant, publish_at
from ductwork.streams.model import Stream
from ductwork.streams.registry import STREAMS, stream_named
from pipelines.usage import UsageError


def run_changes(stream_name: str, since: str | None, limit: int, snapshots_dir: Path) -> int:
    """Print the stream's walk from ``since`` (every record without it) as NDJSON, to the end,
    and the token that follows it on stderr; returns an exit code."""
    stream = _stream(stream_name)
    try:
        _, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    with con:
        mirror = feed.mirror_id(con)
        try:
            position = (
                feed.Position(stream.name, None)
                if since is None
                else feed.decode_token(since, mirror)
            )
        except feed.InvalidToken as exc:
            raise UsageError(f"--since is not a token of this mirror ({exc})") from None
        if position.stream != stream.name:
            raise UsageError(f"--since is a token of the stream {position.stream!r}")
        out = sys.stdout.buffer
        while True:
            try:
                page = feed.read_page(con, stream.name, stream.sql, position, limit)
            except feed.HistoryGone as gone:
                print(f"ductwork: {gone}", file=sys.stderr)
                return 1
            for change in page.changes:
                out.write(change.json_bytes() + b"\n")
            if not page.has_more:
                break
            position = feed.decode_token(page.next_token, mirror)
        out.flush()
    print(page.next_token, file=sys.stderr)
    return 0


def run_diff(
    before: str, after: str, stream_name: str | None, output: str, snapshots_dir: Path
) -> int:
    """Print what changed between two instants, per stream; returns an exit code."""
    streams = [_stream(stream_name)] if stream_name else list(STREAMS)
    try:
        _, con = snapshots.open_current(snapshots_dir)
    except FileNotFoundError as exc:
        print(f"ductwork: {exc}", file=sys.stderr)
        return 2
    with con:
        kept = feed_queries.publishes(con)
        try:
            start = publish_at(kept, parse_instant(before))
            end = publish_at(kept, parse_instant(after))
        except BadInstant as exc:
            raise UsageError(str(exc)) from None
        except BeforeHistory as gone:
            oldest = format_datetime(gone.oldest.published_at)
            print(f"ductwork: history before {oldest} is no longer kept", file=sys.stderr)
            return 1
        reached = _reaching(streams, kept, feed.horizons(con), start)
        if not reached:  # the one stream asked for (each one left out is named above)
            return 1
        diffs = [diff_stream(con, stream, start, end) for stream in reached]
    if output == "json":
        document = {
            "from": start.version,
            "to": end.version,
            "streams": [diff.as_json() for diff in diffs],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(f"from {start.version} ({format_datetime(start.published_at)})")
        print(f"to   {end.version} ({format_datetime(end.published_at)})")
        for diff in diffs:
            print(_table(diff))
    return 0


def _reaching(
    streams: list[Stream],
    kept: list[feed_entries.Publish],
    horizons: dict[str, int],
    start: feed_entries.Publish,
) -> list[Stream]:
    """The streams whose history reaches back to ``start``; each other one (kept shorter than
    the rest, ``DUCTWORK_HISTORY_DAYS_<STREAM>``) is named on stderr and left out."""
    reached = []
    for stream in streams:
        own = feed.kept_for(kept, horizons, stream.name)
        if own and own[0].seq <= start.seq:
            reached.append(stream)
        else:
            oldest = format_datetime(own[0].published_at) if own else "now"
            print(f"ductwork: {stream.name} left out: its history before {oldest} is no longer "
                  "kept", file=sys.stderr)  # fmt: skip
    return reached


def _table(diff: StreamDiff) -> str:
    lines = [
        "",
        f"{diff.stream}: {diff.added:,} added, {diff.changed:,} changed, {diff.deleted:,} deleted",
    ]
    for member, records in diff.changed_members.items():
        lines.append(f"  {member:<40} changed in {records:,} records")
    for label, members in (
        ("appeared", diff.appeared),
        ("disappeared", diff.disappeared),
        ("changed type", diff.retyped),
    ):
        for member in members:
            lines.append(f"  member {label}: {member}")
    return "\n".join(lines)


def _stream(name: str) -> Stream:
    try:
        return stream_named(name)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
