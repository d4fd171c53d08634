"""How many cores a full ``ductwork sync`` keeps busy, step by step, and the sandbox meanwhile.

    uv run --frozen --group bench python -m bench.step_cores [--scale medium]

A reference, with no target. It starts the sandbox (and moto, for the manuals) as the suite
does, then one whole ``uv run --frozen ductwork sync`` process on a fresh data folder, and
samples the CPU time of that process tree and of the sandbox every quarter of a second. Each
span ends at a step line the sync prints, so a span is the step named by that line: the
first also holds the start-up, a step shorter than a sample is counted in the next, and the
last row (the summary and the exit) misses what the sync spent after its last sample. On two
cores, a span near 1.0 core for the sync and near 0 for the sandbox leaves a core idle.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.launching import LAUNCH, ROOT, prepare_children_environment
from bench.measuring import process_cpu_s
from bench.sync_parts import STEP_LINE
from bench.upstreams import BUCKET, KEY, start_object_store, upstream
from ductwork.settings import upstream_environment
from pipelines.processes import ProcessGroup

SAMPLE_S = 0.25


def cpu_s(pid: int) -> float:
    """A process's CPU time so far; 0.0 once it is gone."""
    return process_cpu_s(pid) or 0.0


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``uv run`` starts the sync as its child)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        # A child is listed under the thread that started it, not always the main one.
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


class Spans:
    """Wall time and CPU seconds per span, a span ending at each step line."""

    def __init__(self) -> None:
        self.current = "(start-up)"
        self.rows: dict[str, list[float]] = {}
        self.steps = 0
        self.lock = threading.Lock()

    def read(self, sync: subprocess.Popen[str]) -> None:
        """Follow the sync's output: a step line closes the span it ends."""
        for line in sync.stdout or ():
            if match := STEP_LINE.match(line):
                with self.lock:
                    self.close(match[1])

    def close(self, step: str) -> None:
        """Rename the open span after the step that ended it, and open the next."""
        self.steps += 1
        name = step if self.steps > 1 else f"start-up and {step}"
        if self.current in self.rows:
            self.rows[name] = self.rows.pop(self.current)
        self.current = f"after {step}, to the exit"

    def add(self, wall: float, sync: float, sandbox: float) -> None:
        with self.lock:
            row = self.rows.setdefault(self.current, [0.0, 0.0, 0.0])
            row[0] += wall
            row[1] += sync
            row[2] += sandbox


def sample(command: list[str], env: dict[str, str], sandbox_pid: int) -> Spans:
    """Run the sync, sampling its process tree's and the sandbox's CPU time."""
    spans = Spans()
    sync = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    reader = threading.Thread(target=spans.read, args=(sync,), daemon=True)
    reader.start()
    seen: dict[int, float] = {}  # every process of the tree, at its last reading

    def tree_cpu() -> float:
        for pid in tree(sync.pid):
            seen[pid] = max(seen.get(pid, 0.0), cpu_s(pid))
        return sum(seen.values())

    then, mine, theirs = time.monotonic(), tree_cpu(), cpu_s(sandbox_pid)
    while sync.poll() is None:
        time.sleep(SAMPLE_S)
        now, mine_now, theirs_now = time.monotonic(), tree_cpu(), cpu_s(sandbox_pid)
        spans.add(now - then, mine_now - mine, theirs_now - theirs)
        then, mine, theirs = now, mine_now, theirs_now
    reader.join(timeout=10)
    if sync.returncode != 0:
        raise SystemExit(f"ductwork sync exited with {sync.returncode}")
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="medium")
    options = parser.parse_args()
    os.chdir(ROOT)
    prepare_children_environment()
    with tempfile.TemporaryDirectory(prefix="ductwork-cores-") as work, ProcessGroup() as group:
        s3_url = start_object_store(group)
        with upstream(options.scale, group, s3_url) as up:
            env = {
                **os.environ,
                "DUCTWORK_HOME": str(Path(work) / "home"),
                **upstream_environment(up.url, KEY, up.s3_url, BUCKET),
            }
            spans = sample([*LAUNCH, "ductwork", "sync"], env, up.pid)
    print(f"Cores kept busy by a full `ductwork sync` at {options.scale}, "
          f"on {os.cpu_count()} cores (sampled every {SAMPLE_S} s):")  # fmt: skip
    print()
    print("| span | wall s | sync, cores | sandbox, cores |")
    print("| --- | --- | --- | --- |")
    total = [0.0, 0.0, 0.0]
    for name, (wall, mine, theirs) in spans.rows.items():
        print(f"| {name} | {wall:.1f} | {mine / wall:.2f} | {theirs / wall:.2f} |")
        total = [total[0] + wall, total[1] + mine, total[2] + theirs]
    wall, mine, theirs = total
    print(f"| whole run | {wall:.1f} | {mine / wall:.2f} | {theirs / wall:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
