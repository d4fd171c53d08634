"""schemathesis's CLI, every check, against ``ductwork serve`` and its own OpenAPI document.

The run reads the repository's ``schemathesis.toml`` (from the folder it starts in), as an
outside check would: every answer must be documented, and every request the document calls
valid must be accepted, but for the two rules the document states in words.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ductwork.contract import paths
from ductwork.keys import GRANTABLE_SCOPES, KeyFile
from ductwork.settings import HomeSettings
from sandbox.local_server import HOST, free_socket
from tests.conftest import ROOT, home_with_published_snapshot
from tests.helpers.serve_process import serving_process

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
EXAMPLES_PER_OPERATION = 40
SEED = 20261124
RUN_LIMIT_S = 540


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with free_socket() as sock:
        return sock.getsockname()[1]


SERVE_SETTINGS = {
    "DUCTWORK_LOG_LEVEL": "warning",
    # No job may be queued on a Dagster that happens to run on this machine.
    "DUCTWORK_DAGSTER_URL": f"http://{HOST}:{_closed_port()}",
    # The document is read with the ops key, as an operator reads it.
    "DUCTWORK_SERVE_PUBLIC_DOCS": "0",
}


def test_every_schemathesis_check_passes_against_the_served_document(
    synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    key = KeyFile(HomeSettings(home=home).keys_path).create("fuzz", list(GRANTABLE_SCOPES))
    assert (ROOT / "schemathesis.toml").is_file()
    with serving_process(home, 1, SERVE_SETTINGS) as api:
        url = api.url
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
