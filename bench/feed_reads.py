"""The changes feed's first reads alone, on a data folder the memory part has synced: a walk's
pages read from the publish's change file against the same pages read from the history (the
same folder without its change files), side by side, each against the current list page.

``bench.memory`` times each feed page's first request once, on one server. Here two
``ductwork serve`` run at once on the same snapshot: one with the change files its publish
wrote, one on a copy of the folder without them (a walk there is read from the history, as
before change files). Each round starts both afresh and follows the digital assets' walk from
the token, 1000 changes a page, each page's first request to one server then the other (which
first alternates), each followed by a current list page of 1000 from that server; both
servers' pages must be the same bytes. A last round asks every page again (each worker keeps
what it answered): the repeat requests. It also times writing the change files of the current
publish, carried on from the last publish's and from the history's log alone.

    python -m bench.feed_reads --home DIR --token TOKEN [--rounds 3] [--pages 20]

``--home`` is a data folder after a full sync and syncs after changes (``bench.memory``'s), and
``--token`` the token that followed its initial load of the digital assets.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import httpx

from bench.serving_load import SERVE_UNDER_LOAD, create_key
from ductwork import snapshots
from ductwork.history import change_file_names
from ductwork.history.change_files import write_change_files
from ductwork.settings import HomeSettings
from pipelines.processes import ProcessGroup, wait_until_answering
from sandbox.local_server import free_socket

ASSETS = "/warehouse/v1.0/digital-assets"
SIDES = ("history", "change file")


@dataclass
class Reads:
    """Milliseconds per side: each feed page's first request, each list page beside it, and
    the repeat requests of the feed pages."""

    first: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    listed: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    repeat: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    opening: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    changes: int = 0


def timed(client: httpx.Client, url: str) -> tuple[float, bytes]:
    """One request's milliseconds and body (it must answer 200)."""
    started = time.perf_counter()
    answer = client.get(url)
    spent = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:200])
    return spent, answer.content


def serve(group: ProcessGroup, home: Path) -> str:
    """``ductwork serve`` over ``home`` (its default two workers); its URL once it answers."""
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DUCTWORK_HOME": str(home), **SERVE_UNDER_LOAD}
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--host", "127.0.0.1"]
    server = group.start([*command, "--port", str(port)], env=env)
    wait_until_answering(url + "/healthz", server, timeout_s=300)
    return url


def one_round(
    homes: dict[str, Path], key: str, token: str, pages: int, turn: int, found: Reads
) -> None:
    """Both servers started afresh; the walk's first requests, each beside a list page."""
    with ProcessGroup() as group:
        urls = {side: serve(group, home) for side, home in homes.items()}
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=600) as client:
            for url in urls.values():  # each server's list pages warm, as in use
                for page in range(1, pages + 1):
                    timed(client, f"{url}{ASSETS}?count=1000&page={page}")
            since, walk = token, []
            for index in range(pages):
                path = f"/_ductwork/v1/changes/digital-assets?since={since}&limit=1000"
                order = SIDES if (index + turn) % 2 == 0 else SIDES[::-1]
                bodies = {}
                for side in order:
                    spent, bodies[side] = timed(client, urls[side] + path)
                    (found.opening if index < 2 else found.first)[side].append(spent)
                    listed = f"{urls[side]}{ASSETS}?count=1000&page={index + 1}"
                    found.listed[side].append(timed(client, listed)[0])
                assert bodies[SIDES[0]] == bodies[SIDES[1]], f"page {index + 1} differs"
                walk.append(path)
                page = httpx.Response(200, content=bodies[SIDES[0]]).json()
                found.changes = len(page["changes"])
                if not page["hasMore"]:
                    break
                since = page["next"]
            if turn == 0:  # the repeat requests: every page again, its answer kept
                for path in walk:
                    for side in SIDES:
                        found.repeat[side].append(timed(client, urls[side] + path)[0])


def prepare(home: Path, work: Path) -> dict[str, Path]:
    """The folder with its change files (written from the history when its publish wrote
    none) and a copy without them, its files linked."""
    folder = HomeSettings(home=home).snapshots_dir
    published = snapshots.current(folder)
    assert published is not None, "the data folder has no published snapshot"
    names = [
        p.name for p in folder.glob(f"{change_file_names.CHANGES_PREFIX}{published.version}.*")
    ]
    if not names:
        with duckdb.connect(str(published.path), read_only=True) as con:
            write_change_files(con, folder)
    bare = work / "without-change-files"
    shutil.copytree(home, bare, copy_function=os.link)
    for path in HomeSettings(home=bare).snapshots_dir.glob(f"{change_file_names.CHANGES_PREFIX}*"):
        path.unlink()
    return {SIDES[0]: bare, SIDES[1]: home}


def write_times(home: Path, work: Path) -> dict[str, float]:
    """Seconds to write the current publish's change files: carried on from the last
    publish's (when beside it), and from the history's log alone; and their size, MiB."""
    folder = HomeSettings(home=home).snapshots_dir
    published = snapshots.current(folder)
    assert published is not None
    found = {}
    with duckdb.connect(str(published.path), read_only=True) as con:
        for name, where in (("carried on", work / "carried"), ("from the log", work / "logged")):
            where.mkdir()
            if name == "carried on":
                for path in folder.glob(f"{change_file_names.CHANGES_PREFIX}*"):
                    os.link(path, where / path.name)
                for path in where.glob(f"{change_file_names.CHANGES_PREFIX}{published.version}.*"):
                    path.unlink()  # the current publish's: written anew
            started = time.perf_counter()
            write_change_files(con, where)
            found[name] = time.perf_counter() - started
    mine = folder.glob(f"{change_file_names.CHANGES_PREFIX}{published.version}.*")
    found["size MiB"] = sum(path.stat().st_size for path in mine) / 2**20
    found["snapshot MiB"] = published.path.stat().st_size / 2**20
    return found


def report(found: Reads, writes: dict[str, float], rounds: int) -> list[str]:
    """The figures as lines of text."""
    lines = [f"rounds: {rounds}; pages of {found.changes}+ changes (the last one's count)"]
    for side in SIDES:
        first, listed = statistics.median(found.first[side]), statistics.median(found.listed[side])
        repeat = statistics.median(found.repeat[side])
        opening = ", ".join(f"{ms:.1f}" for ms in found.opening[side])
        lines += [
            f"{side}: first request of pages 3+ {first:.2f} ms / list page {listed:.2f} ms = "
            f"{first / listed:.2f} (n={len(found.first[side])}); repeat request {repeat:.2f} ms "
            f"= {repeat / listed:.2f}; pages 1 and 2 of each round: {opening} ms",
        ]
        whole = found.opening[side] + found.first[side]
        lines.append(
            f"{side}: first request of every page (as bench.memory takes the median) "
            f"{statistics.median(whole):.2f} ms = {statistics.median(whole) / listed:.2f}"
        )
    lines.append("change files of the current publish: " + ", ".join(
        f"{name} {value:.2f}" for name, value in writes.items()
    ))  # fmt: skip
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    options = parser.parse_args()
    found = Reads()
    key = create_key(options.home)  # before the copy: both folders know it
    with tempfile.TemporaryDirectory(prefix="ductwork-feed-reads-") as work:
        homes = prepare(options.home, Path(work))
        for turn in range(options.rounds):
            one_round(homes, key, options.token, options.pages, turn, found)
            print(f"[feed reads] round {turn + 1} done", flush=True)
        writes = write_times(options.home, Path(work))
    print("\n".join(report(found, writes, options.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
