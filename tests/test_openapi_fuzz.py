"""schemathesis's CLI, every check, against ``ductwork serve`` and its own OpenAPI document.

The run reads the repository's ``schemathesis.toml`` (from the folder it starts in), as an
outside check would: every answer must be documented, and every request the document calls
valid must be accepted, but for the two rules the document states in words.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ductwork.contract import paths
from ductwork.keys import GRANTABLE_SCOPES, KeyStore
from ductwork.local_server import HOST, free_socket
from ductwork.settings import HomeSettings
from pipelines.processes import wait_until_answering
from tests.conftest import ROOT, home_with_published_snapshot

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
EXAMPLES_PER_OPERATION = 40
SEED = 20261124
RUN_LIMIT_S = 540


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with free_socket() as sock:
        return sock.getsockname()[1]


@contextmanager
def ductwork_serve(home: Path) -> Iterator[str]:
    """``ductwork serve`` (one worker) on a free loopback port; its URL while the block runs."""
    port = _closed_port()
    env = {
        **os.environ,
        "DUCTWORK_HOME": str(home),
        "DUCTWORK_LOG_LEVEL": "warning",
        # Generated requests must not be cut short by the per-key limit.
        "DUCTWORK_SERVE_KEY_REQUESTS_PER_SECOND": "1000000",
        # No job may be queued on a Dagster that happens to run on this machine.
        "DUCTWORK_DAGSTER_URL": f"http://{HOST}:{_closed_port()}",
    }
    env.pop("DUCTWORK_SERVE_PUBLIC_DOCS", None)  # the document is read with the ops key
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--host", HOST]
    command += ["--port", str(port), "--workers", "1"]
    child = subprocess.Popen(
        command, cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://{HOST}:{port}"
        wait_until_answering(f"{url}/healthz", child, timeout_s=90.0)
        yield url
    finally:
        with suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)


def test_every_schemathesis_check_passes_against_the_served_document(
    synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    key = KeyStore(HomeSettings(home=home).keys_path).create("fuzz", list(GRANTABLE_SCOPES))
    assert (ROOT / "schemathesis.toml").is_file()
    with ductwork_serve(home) as url:
        command = [
            str(SCHEMATHESIS), "run", f"{url}/openapi.json",
            "--checks", "all",
            "--header", f"Authorization: Bearer {key}",
            "--max-examples", str(EXAMPLES_PER_OPERATION),
            "--seed", str(SEED),
            "--workers", "1",
            # Starts a real image-sync job; tests/test_pim_image_sync.py covers it.
            "--exclude-path", paths.PIM_IMAGE_SYNC,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT_S,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    report = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    tested = re.search(r"Tested: (\d+)", done.stdout)
    assert tested is not None and int(tested.group(1)) >= 25, report  # every other operation
