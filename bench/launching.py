"""How the bench starts its children as users start ductwork, the environment they inherit,
and pinning and stopping them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

UV = shutil.which("uv") or str(HERE.parent / ".tools" / "bin" / "uv")
# How users start ductwork (docs/commands.md: `uv run ductwork ...`; the Makefile's RUN):
# the launcher's own cost is part of what they wait for, and the start-up floor is started
# the same way, so it is in both sides of that ratio.
LAUNCH = [UV, "run", "--frozen"]
STARTUP_FLOOR = [*LAUNCH, "python", "-c", "import dagster, duckdb"]
# A reference beside them: a Dagster run of one asset that does nothing (``bench.noop_run``).
NOOP_RUN = [*LAUNCH, "python", "-m", "bench.noop_run"]


def pin(pids: list[int], cores: str) -> None:
    """Every thread of ``pids`` onto ``cores`` (``taskset -a``)."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-pc", cores, str(pid)], capture_output=True, check=False)


def stop(child: subprocess.Popen) -> None:
    """SIGTERM a child's whole session (uvicorn's workers too) and wait for it."""
    with suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def ensure_wrk() -> None:
    """Install Debian's wrk when it is missing (the load generator of the serving part)."""
    if shutil.which("wrk"):
        return
    print("installing wrk (apt-get install wrk)", flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=True)


def prepare_this_process() -> None:
    """Signals, the children's environment and wrk, before any part starts."""
    # SIGTERM unwinds like Ctrl-C, so the servers and children started below are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    prepare_children_environment()
    ensure_wrk()


def prepare_children_environment() -> None:
    """What every child the bench starts inherits: moto's credentials, and ``uv run``
    launching as a user's does."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    # A user's `uv run` does not recompile the environment's bytecode on every launch; with
    # this set (as `make` once exported it), each launch spent about half a second doing so,
    # in the syncs and the start-up floor alike.
    os.environ.pop("UV_COMPILE_BYTECODE", None)
