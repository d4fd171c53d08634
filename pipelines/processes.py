"""Child processes that are started together and always stopped together."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path

import httpx

PROJECT_ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = PROJECT_ROOT / "workspace.yaml"


def installed_command(name: str) -> str:
    """A console script of this environment (``dagster``, ``moto_server``), found beside the
    running interpreter, so it works without the environment's ``bin`` on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed in this environment: run make install")
    return found


class ProcessGroup(AbstractContextManager["ProcessGroup"]):
    """Starts children in sessions of their own and stops each whole session on exit.

    A session per child lets one signal reach everything it spawned (``dagster dev`` runs a
    webserver, a daemon and code servers), so nothing is left behind.
    """

    def __init__(self) -> None:
        self._children: list[subprocess.Popen[bytes]] = []

    def start(self, command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``command`` in a new session."""
        child = subprocess.Popen(list(command), env=env, start_new_session=True)
        self._children.append(child)
        return child

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every session, then SIGKILL what is still alive after ``grace_s``."""
        for child in reversed(self._children):
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in reversed(self._children):
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
        self._children.clear()

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()


def _signal_group(child: subprocess.Popen, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(child.pid, sig)


def wait_until_answering(
    url: str, child: subprocess.Popen | None = None, timeout_s: float = 120.0
) -> None:
    """Poll ``url`` until it answers any HTTP status; fail if the child exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise RuntimeError(f"{url}: the process serving it exited with {child.returncode}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f}s")
