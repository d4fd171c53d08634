"""What the mirror's memory costs, at one scale, as users run it: ``ductwork sync`` and
``ductwork serve`` as whole processes on a data folder on disk.

1. a full sync, then ``--syncs`` incremental syncs each after 1 % of the digital assets and
   the leads changed upstream; the warehouse with its history against the same warehouse
   without it (both written afresh by DuckDB, so that neither counts free blocks);
2. ``ductwork serve`` on that folder: a changes-feed page of 1000 changes against the current
   list page of 1000 records, a page of 100 records as of the first publish against the same
   current page, and a lookup as of the first publish against the current lookup; requests
   one at a time on one connection, the two sides interleaved, medians over ``--requests``.
   Each side cycles through as many distinct answers (20 list pages, the first 20 pages of the
   feed's walk since the first publish, ...), each asked once before the timing, so both sides
   are timed as a server in use answers them: from each worker's caches (for a feed page, a
   repeat request). Each feed page's first request (its answer not yet kept by the worker,
   read from the change file of the publish the walk is pinned to) is a figure of its own,
   each followed by a current list page of 1000, over several walks whose pages are shifted
   from one another's so that none is asked twice; the first request to the first publish
   (which rebuilds it, once per host) is timed apart and reported beside the figures.

    python -m bench.memory --scale medium          # what make bench runs as its memory part
    python -m bench.memory --scale small --syncs 3 # a quick pass
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import duckdb
import httpx

from bench.launching import LAUNCH, ROOT, prepare_children_environment
from bench.measuring import measured
from bench.serving_load import create_key, start_ductwork_serve
from bench.upstreams import KEY, Upstream, start_object_store, upstream
from ductwork import snapshots
from ductwork.settings import HomeSettings, upstream_environment
from pipelines.processes import ProcessGroup
from warehouse_sql import quote_identifier

BUCKET = "ductwork-bench"
TARGETS = {"feed": 3.0, "feed_first": 2.0, "as_of_page": 3.0, "as_of_lookup": 2.0, "size": 1.5}
FIGURES = {
    "feed": "changes-feed page of 1000 changes, repeat request (its answer kept) / current "
    "list page of 1000",
    "feed_first": "changes-feed page of 1000 changes, first request (its answer not yet kept) "
    "/ current list page of 1000",
    "as_of_page": "page of 100 as of an earlier publish / current page of 100",
    "as_of_lookup": "lookup as of an earlier publish / current lookup",
    "size": "warehouse with history / without, after the syncs",
}


@dataclass
class MemoryFindings:
    """What the memory part measured."""

    scale: str = ""
    syncs: list[float] = field(default_factory=list)  # seconds of each incremental sync
    size_with: int = 0
    size_without: int = 0
    warehouse_file: int = 0
    rebuild_s: float = 0.0
    page_changes: int = 0  # the fewest changes in a feed page measured (1000 unless fewer)
    feed_pages: int = 0  # distinct feed pages the feed figure cycles through
    feed_first_ms: float = 0.0  # median of each feed page's first request (answer not kept)
    feed_first_pages: list[float] = field(default_factory=list)  # ms: the walk's pages 1 and 2
    first_requests: int = 0  # feed pages' first requests timed, each beside a list page
    # figure -> (ours: median ms, current: median ms)
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)
    requests: int = 0

    def ratios(self) -> dict[str, float]:
        """Each figure's ratio, as its target states it."""
        found = {name: ours / current for name, (ours, current) in self.latency.items()}
        if self.size_without:
            found["size"] = self.size_with / self.size_without
        return found


def sync(up: Upstream, home: Path, log: Path, *extra: str) -> float:
    """``ductwork sync`` as a whole process; its seconds."""
    env = {"DUCTWORK_HOME": str(home), **upstream_environment(up.url, KEY, up.s3_url, BUCKET)}
    return measured([*LAUNCH, "ductwork", "sync", *extra], log, env, ROOT).seconds


def sizes(warehouse: Path, work: Path) -> tuple[int, int]:
    """The warehouse copied afresh with its history, and without (bytes)."""
    found = []
    for name, schemas in (("with", ("main", "history")), ("without", ("main",))):
        target = work / f"size-{name}.duckdb"
        target.unlink(missing_ok=True)
        con = duckdb.connect()
        con.execute("ATTACH ? AS source (READ_ONLY)", [str(warehouse)])
        con.execute("ATTACH ? AS target", [str(target)])
        for schema in schemas:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS target.{schema}")
            tables = con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'source' "
                "AND schema_name = ?",
                [schema],
            ).fetchall()
            for (table,) in tables:
                name = f"{schema}.{quote_identifier(table)}"
                con.execute(f"CREATE TABLE target.{name} AS SELECT * FROM source.{name}")
        con.execute("CHECKPOINT target")
        con.close()
        found.append(target.stat().st_size)
    return found[0], found[1]


def timed(client: httpx.Client, url: str) -> float:
    """One request's milliseconds (it must answer 200)."""
    started = time.perf_counter()
    answer = client.get(url)
    spent = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:200])
    return spent


def latencies(pairs: dict[str, tuple[list[str], list[str]]], key: str, requests: int) -> dict:
    """Per figure, the median milliseconds of its two sides, interleaved request by request."""
    found = {}
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        for name, (ours, current) in pairs.items():
            spent: tuple[list[float], list[float]] = ([], [])
            for index in range(requests):
                spent[0].append(timed(client, ours[index % len(ours)]))
                spent[1].append(timed(client, current[index % len(current)]))
            found[name] = (statistics.median(spent[0]), statistics.median(spent[1]))
    return found


def measure(
    up: Upstream, group: ProcessGroup, home: Path, work: Path, syncs: int, requests: int
) -> MemoryFindings:
    """The memory part on a synced data folder: ``syncs`` syncs after 1 % changed each, the
    warehouse's sizes, and the figures against the publish that was current before them."""
    found = MemoryFindings(scale=up.scale, requests=requests)
    log = work / "children.log"
    before = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert before is not None, "the data folder has no published snapshot"
    token = first_token(home, work)
    stats = up.stats()
    counts = {"assets_updated": stats["assets"] // 100, "leads_changed": stats["leads"] // 100}
    for number in range(syncs):
        up.mutate(counts)
        found.syncs.append(sync(up, home, log))
        print(f"[memory] sync {number + 1} after 1 % changed: {found.syncs[-1]:.1f}s", flush=True)
    warehouse = HomeSettings(home=home).warehouse_path
    found.warehouse_file = warehouse.stat().st_size
    found.size_with, found.size_without = sizes(warehouse, work)
    found.latency, found.rebuild_s, walks = serve_and_measure(
        group, home, before.version, token, requests
    )
    walk = walks[0]
    found.page_changes, found.feed_pages = min(walk.changes), len(walk.changes)
    first = [ms for each in walks for ms in each.first_ms]
    beside = [ms for each in walks for ms in each.list_ms]
    found.first_requests = len(first)
    found.feed_first_ms = statistics.median(first)
    found.feed_first_pages = walk.first_ms[:2]
    found.latency["feed_first"] = (found.feed_first_ms, statistics.median(beside))
    return found


def run(scale: str, syncs: int, requests: int, work: Path) -> MemoryFindings:
    """The memory part alone: a sandbox of ``scale``, a full sync, then ``measure``."""
    with ProcessGroup() as group:
        s3_url = start_object_store(group)
        with upstream(scale, group, s3_url) as up:
            home = work / "home"
            sync(up, home, work / "children.log")
            return measure(up, group, home, work, syncs, requests)


def first_token(home: Path, work: Path) -> str:
    """The token that follows the initial load of the digital assets (``ductwork changes``)."""
    out = work / "initial-load.ndjson"
    with out.open("wb") as sink:
        done = subprocess.run(
            [*LAUNCH, "ductwork", "changes", "digital-assets", "--limit", "10000"],
            cwd=ROOT, env={**os.environ, "DUCTWORK_HOME": str(home)},
            stdout=sink, stderr=subprocess.PIPE, text=True, check=True,
        )  # fmt: skip
    out.unlink()
    return done.stderr.strip().splitlines()[-1]


FEED_PAGES = 20  # distinct pages of the walk the feed figure cycles through, as many as list pages
# The first-request figure walks the feed this many times from the same token, each walk's pages
# shifted by FIRST_SHIFT changes from the last one's, so that every page it times is one no
# request has asked for yet.
FIRST_WALKS = 5
FIRST_SHIFT = 200


@dataclass
class FeedWalk:
    """The first pages of the feed's walk since a token: the URL of each, its changes, the
    milliseconds of its first request (its answer not yet kept), and those of the current list
    page asked just after each."""

    urls: list[str] = field(default_factory=list)
    changes: list[int] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    list_ms: list[float] = field(default_factory=list)


def walk_feed(
    client: httpx.Client, url: str, token: str, pages: int, beside: list[str], shift: int = 0
) -> FeedWalk:
    """Follow the digital assets' walk from ``token``, 1000 changes a page, for up to
    ``pages`` pages (fewer if it ends first), each page's first request followed by a current
    list page of ``beside`` in turn, both timed: the two sides interleaved, as every other
    figure's are. With ``shift``, a page of that many changes first (not timed), so that the
    pages timed start elsewhere than a walk without it.

    Between two requests the walk reads only the page's head (its members before
    ``changes``, which the feed writes first), and parses the pages' changes once the walk is
    over: parsing 400 kB of JSON between two timed requests made the next one 1 ms slower on
    the client (measured), a cost the list side, timed back to back, does not carry."""
    walk = FeedWalk()
    since = token
    if shift:
        head = page_head(_get(client, f"{url}/_ductwork/v1/changes/digital-assets?since={since}"
                                      f"&limit={shift}"))  # fmt: skip
        if not head["hasMore"]:  # a walk shorter than the shift: nothing left to time
            return walk
        since = head["next"]
    bodies = []
    for index in range(pages):
        page_url = f"{url}/_ductwork/v1/changes/digital-assets?since={since}&limit=1000"
        started = time.perf_counter()
        body = _get(client, page_url)
        walk.first_ms.append((time.perf_counter() - started) * 1000)
        walk.list_ms.append(timed(client, beside[index % len(beside)]))
        walk.urls.append(page_url)
        bodies.append(body)
        head = page_head(body)
        if not head["hasMore"]:
            break
        since = head["next"]
    walk.changes = [len(json.loads(body)["changes"]) for body in bodies]
    return walk


def _get(client: httpx.Client, url: str) -> bytes:
    """The body of a GET that must answer 200."""
    answer = client.get(url)
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:200])
    return answer.content


def page_head(body: bytes) -> dict:
    """The members of a feed page (JSON) before its ``changes``."""
    members, found, _ = body.partition(b',"changes":[')
    assert found, body[:200]
    return json.loads(members + b"}")


def serve_and_measure(
    group: ProcessGroup, home: Path, version: str, token: str, requests: int
) -> tuple[dict, float, list[FeedWalk]]:
    """``ductwork serve`` over ``home``: the figures' latencies, the first rebuild's time, and
    the walks of the feed measured (the first one's pages are the repeat figure's)."""
    key = create_key(home)
    url, _ = start_ductwork_serve(group, home)
    assets = "/warehouse/v1.0/digital-assets"
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=600) as client:
        skus = [
            item["sku"]
            for item in client.get(f"{url}/products/v2.0/products", params={"count": 50}).json()[
                "data"
            ]
        ]
        at = f"{url}/_ductwork/v1/at/{version}"
        started = time.perf_counter()
        assert client.get(f"{at}/products/v2.0/products?count=1").status_code == 200
        rebuild_s = time.perf_counter() - started
        # The current list pages asked once first, as the list side is before its timing: a
        # worker then serves as in use (its snapshot loaded, its record files written), and
        # the walk's first requests are timed against the same server the list pages are.
        lists = [f"{url}{assets}?count=1000&page={page}" for page in range(1, FEED_PAGES + 1)]
        for page in lists:
            assert client.get(page).status_code == 200
        walks = [
            walk_feed(client, url, token, FEED_PAGES, lists, shift=index * FIRST_SHIFT)
            for index in range(FIRST_WALKS)
        ]
    walk = walks[0]
    pages = [f"{assets}?count=100&page={page}" for page in range(1, 21)]
    lookups = [f"/products/v2.0/units/{quote(sku, safe='')}" for sku in skus]
    pairs = {
        "feed": (walk.urls, lists),
        "as_of_page": ([f"{at}{page}" for page in pages], [f"{url}{page}" for page in pages]),
        "as_of_lookup": ([f"{at}{path}" for path in lookups], [f"{url}{path}" for path in lookups]),
    }
    # One pass unmeasured: each side's answers asked once, as a server in use has them.
    latencies(pairs, key, max(len(ours) for ours, _ in pairs.values()))
    return latencies(pairs, key, requests), rebuild_s, walks


def report(found: MemoryFindings) -> list[str]:
    """The part's section of RESULTS.md, every target met or missed."""
    ratios = found.ratios()

    def met(name: str) -> str:
        return "met" if ratios[name] <= TARGETS[name] else "**missed**"

    names = {name: label for name, label in FIGURES.items() if name != "size"}
    lines = [
        f"### The mirror's memory, scale `{found.scale}`",
        "",
        f"A full sync, then {len(found.syncs)} syncs each after 1 % of the digital assets and "
        "leads changed (whole `ductwork sync` processes); then `ductwork serve`, requests one at "
        f"a time, the two sides interleaved, medians of {found.requests}.",
        "",
        "| figure | value | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for name, label in names.items():
        ours, current = found.latency[name]
        lines.append(
            f"| {label} ({ours:.2f} ms / {current:.2f} ms) | {ratios[name]:.2f} | "
            f"≤ {TARGETS[name]:g} | {met(name)} |"
        )
    lines.append(
        f"| warehouse with history / without, after {len(found.syncs)} syncs "
        f"({found.size_with / 2**20:.1f} MiB / {found.size_without / 2**20:.1f} MiB) | "
        f"{ratios['size']:.2f} | ≤ {TARGETS['size']:g} | {met('size')} |"
    )
    lines += [
        "",
        f"- The repeat-request figure cycles through the first {found.feed_pages} pages of the "
        f"walk since the earlier publish, each of at least {found.page_changes} changes, each "
        "asked once before the timing (a worker keeps the pages it answered). The "
        f"first-request figure takes {found.first_requests} pages no request had asked for, "
        f"from {FIRST_WALKS} walks from the same token, each one's pages shifted by "
        f"{FIRST_SHIFT} changes from the last one's; each page's first request is followed by "
        "a current list page of 1000 (the pages cycled through, each asked once before), both "
        "timed, and the figure is the median of the first requests against the median of "
        "those list pages. The walks start once the current list pages were asked once (the "
        "server then runs as in use, its record files written) and read only each page's "
        "head (`next`, `hasMore`) between two requests, its changes after the last (as the "
        "list side parses nothing between its requests). Each "
        "page is a slice of the change file the newest publish wrote beside its snapshot (every "
        "key changed since the oldest publish kept, in feed order, each with its entry as the "
        "feed writes it). First requests of the first walk's pages 1 and 2: "
        + ", ".join(f"{ms:.1f} ms" for ms in found.feed_first_pages)
        + ".",
        f"- The first request as of the earlier publish rebuilt it from the history: "
        f"{found.rebuild_s:.1f} s (once per host and version).",
        f"- The warehouse file itself: {found.warehouse_file / 2**20:.1f} MiB; syncs after 1 % "
        f"changed: median {statistics.median(found.syncs):.1f} s "
        f"(min {min(found.syncs):.1f}, max {max(found.syncs):.1f}).",
    ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--syncs", type=int, default=30)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None, help="also write the findings here")
    options = parser.parse_args()
    os.chdir(ROOT)  # `uv run` finds the project from the working directory
    prepare_children_environment()
    with tempfile.TemporaryDirectory(prefix="ductwork-memory-") as work:
        found = run(options.scale, options.syncs, options.requests, Path(work))
    print("\n".join(report(found)))
    if options.json is not None:
        options.json.write_text(json.dumps(found.__dict__, default=str, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
