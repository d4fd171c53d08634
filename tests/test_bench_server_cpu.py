"""The serving benchmark's CPU per answer: a load run's result carries the CPU time its server's
processes spent during it, workers included, and the report turns it into microseconds per
answer. The measurement runs on real processes; the report's lines on made-up run results."""

from __future__ import annotations

import subprocess
import sys

from bench.results.targets import cpu_per_answer_us
from bench.serving_load import with_server_cpu
from tests.test_bench_verdicts import LOOKUPS, _report, run

# A worker that says it is up, waits for a line, spends about 0.3 s of CPU, says so, then
# waits for its input to close.
_BURN = (
    "import sys, time\n"
    "print('up', flush=True)\n"
    "sys.stdin.readline()\n"
    "while time.process_time() < 0.3:\n"
    "    pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)
# A supervisor that spends nothing itself and waits for its one worker.
_SUPERVISE = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {_BURN!r}])"


def test_a_runs_server_cpu_counts_what_the_servers_workers_spent_during_it() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISE],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        given, output = server.stdin, server.stdout
        assert given is not None and output is not None
        assert output.readline() == "up\n"  # the worker is running: the run may begin

        def load_run() -> dict:
            """Sets the worker going and ends once it has spent its CPU."""
            given.write("go\n")
            given.flush()
            return {"requests": 10, "line": output.readline()}

        result = with_server_cpu(server.pid, load_run)
        assert result["line"] == "burnt\n" and result["requests"] == 10
        assert result["server_cpu_s"] >= 0.25
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)


def test_cpu_per_answer_is_the_median_of_the_runs_in_microseconds() -> None:
    runs = [
        {"requests": 1000, "server_cpu_s": 0.05},
        {"requests": 2000, "server_cpu_s": 0.08},
        {"requests": 1000, "server_cpu_s": 0.09},
    ]
    assert cpu_per_answer_us(runs) == 50.0  # 50, 40 and 90 µs
    assert cpu_per_answer_us([{"requests": 1000}]) is None


def test_the_report_compares_the_servers_cpu_per_answer_only_when_both_measured_it() -> None:
    good = {"200": 8000, "304": 1000, "404": 1000}
    ours = [{**run(7000, good), "requests": 10_000, "server_cpu_s": 0.8}] * 3
    ceiling = [{**run(10_000, good), "requests": 10_000, "server_cpu_s": 0.4}] * 3
    text = "\n".join(_report(ours, ceiling).body)
    assert "ductwork 80.0 µs (runs: 80.0, 80.0, 80.0), ceiling 40.0 µs" in text
    assert "ductwork / ceiling = **2.00** (a row, no target)" in text
    unmeasured = "\n".join(_report([run(7000, good)] * 3, [run(10_000, good)] * 3).body)
    assert LOOKUPS in unmeasured and "CPU per answer" not in unmeasured
