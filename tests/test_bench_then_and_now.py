"""The then-and-now serving comparison's report, on made-up runs (a unit test: the runs
themselves come from ``wrk`` against real servers, in ``bench.serving_then_and_now``)."""

from __future__ import annotations

from pathlib import Path

from bench.serving_then_and_now import Side, report


def _run(rps: float, cpu_s: float = 0.5) -> dict:
    return {"rps": rps, "requests": int(rps * 4), "server_cpu_s": cpu_s}


def test_each_sides_share_is_the_median_of_its_runs_paired_with_the_ceilings() -> None:
    sides = [Side("base (abc)", Path("a"), Path("b")), Side("this tree", Path("c"), Path("d"))]
    found = {
        "SKU lookups": {
            "base (abc)": [_run(10_000), _run(12_000), _run(11_000)],
            "this tree": [_run(10_000), _run(15_000), _run(20_000)],
            # Paired, this tree's shares are 50 %, 50 % and 80 %; the medians' ratio, 60 %.
            "ceiling": [_run(20_000), _run(30_000), _run(25_000)],
        }
    }
    text = report(found, sides)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    assert rows["this tree"].endswith("| 50% |")
    assert rows["base (abc)"].endswith("| 44% |")  # 50 %, 40 %, 44 %
    assert rows["ceiling"].endswith("| – |")
    # Requests/s of this tree over the base's, medians: 15,000 / 11,000.
    assert "this tree / base (abc), requests/s: **1.36**" in text
    # CPU per answer: 0.5 s over 40,000, 60,000 and 80,000 answers: 12.5, 8.3 and 6.25 µs.
    assert "| this tree | 15,000 | 8.3 |" in text
