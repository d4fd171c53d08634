"""Loading a server as the serving part does: ``wrk`` at saturation, the ceiling it is compared
with, and the CPU time the server's processes spent during a load run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.launching import HERE, LAUNCH
from bench.measuring import process_cpu_s, process_tree
from pipelines.processes import ProcessGroup, wait_until_answering
from sandbox.local_server import free_socket

# What ``ductwork serve`` runs with under load: the per-key limit would cap the load generator's
# single key, and the access log would write a line per request.
SERVE_UNDER_LOAD = {
    "DUCTWORK_LOG_LEVEL": "warning",
    "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000000",
}


def start_ductwork_serve(group: ProcessGroup, home: Path) -> tuple[str, subprocess.Popen]:
    """``ductwork serve`` as the CLI starts it over the data folder ``home``, under load's
    settings, on a free port of 127.0.0.1, once it answers: its URL and its process."""
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = group.start(
        [*LAUNCH, "ductwork", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "DUCTWORK_HOME": str(home), **SERVE_UNDER_LOAD},
    )
    wait_until_answering(url + "/healthz", server, timeout_s=300)
    return url, server


@dataclass(frozen=True)
class Target:
    """A server under open-loop load: its process (to pin), URL, request file and key."""

    process: subprocess.Popen
    url: str
    paths: Path
    key: str | None


def start_ceiling(
    group: ProcessGroup, answers: dict[str, dict[str, Any]], bodies_file: Path, workers: int
) -> tuple[subprocess.Popen, str]:
    """The ceiling (``bench.ceiling_app``) answering ``answers`` (written to ``bodies_file``)
    with ``workers`` uvicorn workers on uvloop and httptools, as ``ductwork serve`` runs;
    started, answering, and its URL."""
    bodies_file.write_text(json.dumps(answers), encoding="utf-8")
    port = free_socket().getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", "bench.ceiling_app:app", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--loop", "uvloop", "--http",
               "httptools", "--log-level", "warning"]  # fmt: skip
    ceiling = group.start(command, env={**os.environ, "BENCH_CEILING_BODIES": str(bodies_file)})
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(f"{url}/{next(iter(answers))}/0", ceiling, timeout_s=120)
    return ceiling, url


def run_wrk(
    url: str, paths_file: Path, key: str | None, options: argparse.Namespace, cores: str | None
) -> dict[str, Any]:
    """One closed-loop ``wrk`` run at saturation over the requests in ``paths_file``, with the
    threads, connections and seconds of ``options`` (on ``cores`` only, when given): the
    figures ``bench/paths.lua`` prints."""
    pinned = ["taskset", "-c", cores] if cores else []
    command = [*pinned, "wrk", f"-t{options.wrk_threads}", f"-c{options.wrk_connections}",
               f"-d{options.serve_seconds}s", "--latency", "-s", str(HERE / "paths.lua"),
               url, "--", str(paths_file), key or "-"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("BENCH_JSON "))
    return json.loads(line.removeprefix("BENCH_JSON "))


def with_server_cpu(pid: int, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A load run's result, with ``server_cpu_s``: the CPU time (user + system) the server
    ``pid`` and its descendants (its workers) spent during it. A process that ended meanwhile
    is left out of the sum."""
    pids = process_tree(pid)
    before = {p: process_cpu_s(p) for p in pids}
    result = run()
    spent = 0.0
    for p, start in before.items():
        end = process_cpu_s(p)
        if start is not None and end is not None:
            spent += end - start
    return {**result, "server_cpu_s": spent}


def create_key(home: Path) -> str:
    """A read API key with every scope, in ``home``'s key file."""
    from ductwork.keys import KeyFile
    from ductwork.settings import HomeSettings

    return KeyFile(HomeSettings(home=home).keys_path).create("bench", ["all"])
