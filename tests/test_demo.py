"""The README's first command: ``ductwork demo`` (what ``make demo`` runs) as a person uses it,
and the lines the README and the documentation give to paste against it."""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from pipelines.processes import wait_until_answering
from tests.helpers.cli import ROOT, STARTUP_LIMIT_S, free_ports, read_lines


def test_demo_prints_a_curl_line_that_answers_real_records_and_stops_everything(
    tmp_path: Path,
) -> None:
    api, ui, sandbox, s3 = free_ports(4)
    env = {**os.environ, "DUCTWORK_HOME": str(tmp_path / "home")}
    demo = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "demo",
         "--api-port", str(api), "--ui-port", str(ui),
         "--sandbox-port", str(sandbox), "--s3-port", str(s3)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=read_lines, args=(demo.stdout, lines), daemon=True).start()
    printed: list[str] = []
    try:
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while not any(line.strip().startswith("curl ") for line in printed):
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
            assert line, "the demo exited before printing its curl line:\n" + "".join(printed)
            printed.append(line)
        curl = next(line.strip() for line in printed if line.strip().startswith("curl "))
        # The object store's access log (a line per request) goes to a file, not the screen.
        assert not [line for line in printed if '" 200 ' in line or "HTTP/1.1" in line]
        answer = subprocess.run(
            [*shlex.split(curl), "--silent", "--show-error", "--max-time", "30"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        body = json.loads(answer.stdout)
        assert body["success"] is True
        assert len(body["data"]) == 2
        assert all(record["sku"] and record["_links"]["self"]["href"] for record in body["data"])

        key = next(line.split()[-1] for line in printed if line.strip().startswith("API key"))
        memory_page_block_runs_against_the_demo(f"http://127.0.0.1:{api}", key)
        readme_tour_query_runs_against_the_demo(tmp_path / "home")

        ui_line = next(line for line in printed if line.strip().startswith("Dagster UI"))
        ui_url = ui_line.split()[2]
        assert ui_url == f"http://127.0.0.1:{ui}"
        wait_until_answering(f"{ui_url}/server_info", demo, timeout_s=180)
        assert httpx.get(f"{ui_url}/server_info", timeout=10).status_code == 200
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            raise
    for port in (api, ui, sandbox, s3):
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
        except httpx.ConnectError:
            continue
        raise AssertionError(f"something still listens on port {port} after the demo stopped")


def memory_page_block_runs_against_the_demo(api_url: str, key: str) -> None:
    """The "Try it against make demo" lines of ``docs/memory.md``, pasted as they are but for
    the demo's URL and key, each curl failing on an HTTP error."""
    page = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    heading = page.index("## Try it against `make demo`")
    start = page.index("```bash\n", heading) + len("```bash\n")
    block = page[start : page.index("```", start)]
    first, rest = block.split("\n", 1)
    assert first.startswith("API=") and "KEY=" in first
    script = "\n".join([
        "set -euo pipefail",
        'curl() { command curl --fail --max-time 30 "$@"; }',
        f"API={api_url}; KEY={key}",
        rest,
    ])  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=180,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '"changes":[' in done.stdout and "memento-datetime" in done.stdout.lower()


def readme_tour_query_runs_against_the_demo(home: Path) -> None:
    """The README's tour query, pasted as it is but for the demo's data folder (the demo's own
    is ``.ductwork/demo``; this one runs in the test's folder)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = readme.index("## A short tour")
    start = readme.index("```bash\n", heading) + len("```bash\n")
    line = readme[start : readme.index("```", start)].strip()
    assert line.startswith("DUCTWORK_HOME=.ductwork/demo ")
    line = line.replace(".ductwork/demo", shlex.quote(str(home)), 1)
    done = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "status" in done.stdout and "count" in done.stdout
