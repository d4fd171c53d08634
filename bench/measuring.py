"""Measuring the bench's children: a whole child process's wall time, peak RSS and CPU time
(``wait4``'s rusage), and a running process's CPU time and descendants from ``/proc``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.launching import HERE
from ductwork.run_worker import proc_stat

FAILED_CHILD_LINES = 20  # of a failed child's output, shown in the suite's error


@dataclass
class Measured:
    """One child process: its wall time, its peak RSS, its CPU time (user + system, with the
    descendants it waited for), its output and the JSON it printed last."""

    seconds: float
    peak_rss: int
    report: dict[str, Any]
    stdout: str = ""
    cpu_s: float = 0.0


def measured(
    command: Sequence[str],
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Measured:
    """Run ``command`` to the end through ``bench/rusage_of.py``: its wall time, and from
    ``wait4``'s rusage of that very child its peak RSS (the largest of it and the descendants
    it waited for) and CPU time."""
    with (
        open(log, "ab") as errors,
        tempfile.NamedTemporaryFile(prefix="rusage-", suffix=".json") as usage_file,
    ):
        logged_before = errors.tell()
        child = subprocess.Popen(
            [sys.executable, "-I", str(HERE / "rusage_of.py"), usage_file.name, *command],
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        assert child.stdout is not None
        out = child.stdout.read()
        if child.wait() != 0:
            # The log sits in the suite's temporary folder, gone once the suite stops: what
            # the child printed last, on either stream, goes into the error.
            with open(log, "rb") as written:
                written.seek(logged_before)
                said = [tail(out), tail(written.read())]
            raise RuntimeError(
                f"{' '.join(command[:6])} failed ({child.returncode}); it printed last:\n"
                + "\n".join(part for part in said if part)
            )
        usage = json.loads(Path(usage_file.name).read_text(encoding="utf-8"))
    text = out.decode()
    lines = [line for line in text.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    return Measured(usage["seconds"], usage["peak_rss"], report, text, usage["cpu_s"])


def tail(output: bytes) -> str:
    """The last ``FAILED_CHILD_LINES`` lines of a child's output."""
    return "\n".join(output.decode(errors="replace").strip().splitlines()[-FAILED_CHILD_LINES:])


def running_cpu_s(pid: int, what: str) -> float:
    """The CPU time so far of a process that must still be running, ``what`` naming it."""
    spent = process_cpu_s(pid)
    if spent is None:
        raise RuntimeError(f"{what} (pid {pid}) is gone")
    return spent


def process_cpu_s(pid: int) -> float | None:
    """A process's CPU time so far (user + system); None once it is gone."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    # utime and stime: fields 14 and 15 of proc(5), items 11 and 12 here.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``ductwork serve`` under ``uv run``: uvicorn's workers),
    from each process's parent in ``/proc/*/stat``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        if (fields := proc_stat(int(entry.name))) is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found = [pid]
    for parent in found:
        found += parents.get(parent, [])
    return found
