"""``ductwork serve --workers 2`` as the CLI starts it: each worker listens on a socket of its
own, so connections opened at once reach every worker rather than the one that wakes first; a
worker that dies is replaced; a port another server listens on is refused, not shared; a
hang-up stops every worker gracefully."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from pipelines.processes import PROJECT_ROOT
from tests.conftest import home_with_published_snapshot
from tests.helpers.bursts import ONE, logged_pids
from tests.helpers.serve_process import RunningApi, serving_process, start_serve, stop_serve

WORKERS = 2
CONNECTIONS = 32  # as many as the benchmark's load generators open at once
ROUNDS = 5
STARTED_WITHIN_S = 60.0  # a worker imports the app and loads the snapshot first
REFUSED_WITHIN_S = 60.0
STOPPED_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def served(synced_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[RunningApi, Path]
]:  # fmt: skip
    """``ductwork serve --workers 2`` over a copy of the synced snapshot, and its access log."""
    home = tmp_path_factory.mktemp("workers-home")
    home_with_published_snapshot(synced_home, home)
    access_log = tmp_path_factory.mktemp("workers-log") / "access.log"
    with access_log.open("wb") as out, serving_process(home, WORKERS, stdout=out) as api:
        until_every_worker_answers(api, access_log, "warm")
        yield api, access_log


def pids_answering_connections_opened_at_once(url: str, access_log: Path, tag: str) -> set[int]:
    """The worker pids that answered ``CONNECTIONS`` new connections, all opened at once, one
    request each."""

    async def burst() -> set[str]:
        ids = [f"{tag}-{n}" for n in range(CONNECTIONS)]
        clients = [httpx.AsyncClient(base_url=url, limits=ONE, timeout=30) for _ in ids]
        try:
            requests = zip(clients, ids, strict=True)
            answers = await asyncio.gather(
                *(c.get("/healthz", headers={"X-Request-ID": i}) for c, i in requests)
            )
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))
        assert [answer.status_code for answer in answers] == [200] * len(ids)
        return set(ids)

    ids = asyncio.run(burst())
    answered = logged_pids([access_log], ids)
    assert len(answered) == len(ids), "some requests are missing from the access log"
    return set(answered.values())


def worker_pids(api: RunningApi) -> set[int]:
    """The pids of the server's worker processes (the children multiprocessing spawned, not
    its resource tracker)."""
    children = Path(f"/proc/{api.process.pid}/task/{api.process.pid}/children")
    return {
        int(pid)
        for pid in children.read_text(encoding="ascii").split()
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    }


def until_every_worker_answers(api: RunningApi, access_log: Path, tag: str) -> set[int]:
    """Bursts until every worker answered one (a worker's socket takes connections only once
    its app has started); the workers' pids."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    for attempt in itertools.count():
        pids = pids_answering_connections_opened_at_once(api.url, access_log, f"{tag}{attempt}")
        if len(pids) == WORKERS:
            return pids
        assert time.monotonic() < deadline, f"only {pids} answered in {STARTED_WITHIN_S} s"
        time.sleep(0.2)  # poll: a worker is still starting
    raise AssertionError("unreachable")


def test_connections_opened_at_once_reach_every_worker_in_every_round(
    served: tuple[RunningApi, Path],
) -> None:
    api, access_log = served
    # With one socket shared by the workers, the first to wake often accepted all 32.
    for round_ in range(ROUNDS):
        pids = pids_answering_connections_opened_at_once(api.url, access_log, f"round{round_}")
        assert pids == worker_pids(api), f"round {round_}: only {pids} answered"


def test_a_worker_that_dies_is_replaced_and_the_new_one_takes_connections(
    served: tuple[RunningApi, Path],
) -> None:
    api, access_log = served
    before = worker_pids(api)
    assert len(before) == WORKERS
    killed = min(before)
    os.kill(killed, signal.SIGKILL)
    pids = until_every_worker_answers(api, access_log, "after-kill")
    assert killed not in pids and api.process.poll() is None
    assert pids == worker_pids(api) and len(pids & before) == WORKERS - 1
    assert pids == worker_pids(api) and len(pids & before) == WORKERS - 1


def test_a_second_server_on_a_port_already_served_is_refused_not_joined(
    served: tuple[RunningApi, Path],
) -> None:
    api, access_log = served
    port = str(urlsplit(api.url).port)
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--host", "127.0.0.1"]
    refused = subprocess.run(
        [*command, "--port", port, "--workers", str(WORKERS)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert refused.returncode == 3, refused.stderr[-2000:]
    assert f"port {port} is already in use on 127.0.0.1" in refused.stderr
    # Every connection still reaches the first server's workers.
    pids = pids_answering_connections_opened_at_once(api.url, access_log, "after-refusal")
    assert pids == worker_pids(api)


def test_a_hang_up_stops_every_worker_gracefully_and_the_server_exits_0(
    synced_home: Path, tmp_path: Path
) -> None:
    """SIGHUP to the whole process group, as a closing terminal sends it: each worker finishes
    its shutdown (the default action of SIGHUP would end it at once) and the server exits 0.
    A worker still starting finishes starting, then stops."""
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        api = start_serve(home, WORKERS, stderr=stderr)
        try:
            workers = worker_pids(api)
            os.killpg(api.process.pid, signal.SIGHUP)
            returncode = api.process.wait(timeout=STOPPED_WITHIN_S)
        finally:
            if api.process.poll() is None:
                stop_serve(api)
    logged = stderr_path.read_text(encoding="utf-8")
    assert returncode == 0, logged[-2000:]
    assert {f"Finished server process [{pid}]" for pid in workers} <= set(
        line.removeprefix("INFO:     ") for line in logged.splitlines()
    ), logged[-2000:]


@pytest.mark.parametrize("workers", [1, WORKERS])
def test_an_app_that_cannot_start_ends_the_server_with_exit_3_in_one_line_not_in_a_restart_loop(
    tmp_path: Path, workers: int
) -> None:
    """The app factory raises (here the data folder's ``snapshots`` is a file, not a folder):
    before, each worker died with a traceback and was started again, without end."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "snapshots").write_text("not a folder\n", encoding="utf-8")
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--host", "127.0.0.1"]
    try:
        ended = subprocess.run(
            [*command, "--port", "0", "--workers", str(workers)],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=REFUSED_WITHIN_S,
            env={**os.environ, "DUCTWORK_HOME": str(home)},
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"still running after {REFUSED_WITHIN_S} s: {exc.stderr!r}") from exc
    assert ended.returncode == 3, ended.stderr[-2000:]
    assert "the app could not start: NotADirectoryError" in ended.stderr
    assert "Traceback" not in ended.stderr, ended.stderr[-2000:]
