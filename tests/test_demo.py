"""The README's first command: ``ductwork demo`` (what ``make demo`` runs) as a person uses it."""

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
        answer = subprocess.run(
            [*shlex.split(curl), "--silent", "--show-error", "--max-time", "30"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        body = json.loads(answer.stdout)
        assert body["success"] is True
        assert len(body["data"]) == 2
        assert all(record["sku"] and record["_links"]["self"]["href"] for record in body["data"])

        key = next(line.split()[-1] for line in printed if line.strip().startswith("API key"))
        readme_block_runs_against_the_demo(f"http://127.0.0.1:{api}", key)

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


def readme_block_runs_against_the_demo(api_url: str, key: str) -> None:
    """The README's "Try it against make demo" lines, pasted as they are but for the demo's
    URL and key, each curl failing on an HTTP error."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = readme.index("### Try it against `make demo`")
    start = readme.index("```bash\n", heading) + len("```bash\n")
    block = readme[start : readme.index("```", start)]
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
