"""Section 5 of the results file: ``ductwork serve`` against the ceiling on each mix at
saturation, and the lookup mix paced at half ductwork's rate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.results.report_base import ReportBase
from bench.results.tables import median, table
from bench.results.targets import (
    BYTES_SHARE,
    PACED_P99_RATIO_TARGET,
    answer_bytes,
    answers_held,
    cpu_per_answer_runs,
    cpu_per_answer_us,
    lost_requests,
    paced_p99_ratio,
    serving_share_target,
    unexpected_answers,
)

# What the serving tables show of each server's answers, summed over its runs.
ANSWER_COLUMNS = ("unexpected answers", "requests lost")


def _answer_counts(runs: Sequence[Mapping[str, Any]], expected: Mapping[str, float]) -> list[str]:
    """The two answer columns of a server's row: answers the mix did not ask for, requests
    that got no answer (each summed over the runs)."""
    unexpected = sum(unexpected_answers(r.get("statuses") or {}, expected) for r in runs)
    lost = sum(lost_requests(r) for r in runs)
    return [f"{unexpected:,}", f"{lost:,}"]


def _generator_share(runs: list[dict[str, float]]) -> str:
    """The median share of its wall time the paced generator spent on a CPU (``-`` for runs
    that did not report it)."""
    shares = [r["cpu_s"] / r["wall_s"] for r in runs if r.get("cpu_s") and r.get("wall_s")]
    return f"{median(shares):.0%}" if shares else "-"


def _cpu_per_answer_lines(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """The line saying what an answer costs each server in CPU (none when not measured)."""
    ours, ceiling = (cpu_per_answer_us(results[server]) for server in ("ductwork", "ceiling"))
    if ours is None or ceiling is None:
        return []
    runs = {
        server: ", ".join(f"{us:.1f}" for us in cpu_per_answer_runs(results[server]))
        for server in ("ductwork", "ceiling")
    }
    return [
        f"Server CPU per answer (user + system of the server's processes during each run, over "
        f"the requests answered): ductwork {ours:.1f} µs (runs: {runs['ductwork']}), ceiling "
        f"{ceiling:.1f} µs (runs: {runs['ceiling']}), medians; ductwork / ceiling = "
        f"**{ours / ceiling:.2f}** (a row, no target). Unlike requests/s, it leaves out how the "
        "two cores happened to be shared with `wrk`: what an answer costs each server.",
        "",
    ]


class ServingSection(ReportBase):
    """5. Serving: ``ductwork serve`` vs a bare Starlette ceiling."""

    def serving(self) -> None:
        """The section: how the servers were loaded, then each mix's table and verdict, the
        paced runs after the lookup mix's."""
        found = self.found
        if not found.serving:
            return
        setup = found.serving_setup
        opts = self.options
        self.body += [
            "### 5. Serving: `ductwork serve` vs a bare Starlette ceiling",
            "",
            f"`uv run --frozen ductwork serve` with `DUCTWORK_LOG_LEVEL=warning` "
            f"({setup['workers']} workers, its default) against a Starlette app on uvicorn with "
            "as many workers, uvloop and httptools, answering each request of a mix with a "
            "fixed copy (status, encoding, body) of a real answer of the same kind. Saturation: "
            f"`wrk -t{opts.wrk_threads} -c{opts.wrk_connections} -d{opts.serve_seconds}s` with "
            "`bench/paths.lua` (a distinct request each time, round robin over the mix), "
            "sharing both cores with the servers.",
            "",
        ]
        for name, results in found.serving.items():
            self.serving_mix(name, results)
            if name.startswith("SKU") and found.paced:
                self.paced()

    def serving_mix(self, name: str, results: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """One mix at saturation: each server's row, the bytes and CPU per answer, and
        ductwork's share of the ceiling's rate, judged."""
        setup = self.found.serving_setup
        expected = setup.get("expected", {}).get(name, {})
        rows = []
        for server in ("ductwork", "ceiling"):
            runs = results[server]
            rows.append(
                [
                    *self.row(f"{server}, requests/s", [r["rps"] for r in runs], ",.0f"),
                    f"{median(r['p50_ms'] for r in runs):.2f}",
                    f"{median(r['p99_ms'] for r in runs):.2f}",
                    *_answer_counts(runs, expected),
                ]
            )
        share = median(r["rps"] for r in results["ductwork"]) / median(
            r["rps"] for r in results["ceiling"]
        )
        sizes = {server: answer_bytes(results[server]) for server in ("ductwork", "ceiling")}
        full = sizes["ceiling"] is None or (
            sizes["ductwork"] is not None and sizes["ductwork"] >= BYTES_SHARE * sizes["ceiling"]
        )
        held = full and all(answers_held(r, expected) for r in results["ductwork"])
        target = serving_share_target(name)
        shares = ", ".join(f"{status}: {part:.0%}" for status, part in expected.items())
        self.body += [f"#### {name}", "", setup["mixes"][name] + f" (answers: {shares}).", ""]
        self.body += table([*self.run_header("server"), "p50 ms", "p99 ms", *ANSWER_COLUMNS], rows)
        if sizes["ductwork"] is not None and sizes["ceiling"] is not None:
            self.body += [
                f"Bytes read per answer (head and body, median of the runs): ductwork "
                f"{sizes['ductwork']:,.0f}, ceiling {sizes['ceiling']:,.0f}; ductwork's must "
                f"be at least {BYTES_SHARE:.0%} of the ceiling's copies (its heads carry "
                "more headers), or its answers are not the ones the ceiling copies.",
                "",
            ]
        self.body += _cpu_per_answer_lines(results)
        value = f"{share:.0%}" if held else f"{share:.0%}, answers not as the mix asks"
        word = self.verdict(
            f"serving: {name} / ceiling", value, f"≥ {target:.0%}", held and share >= target
        )
        self.body += [f"ductwork / ceiling = **{share:.0%}** (≥ {target:.0%}: {word}).", ""]

    def paced(self) -> None:
        """The lookup mix paced at half ductwork's saturated rate: how, each way's row, the
        pinned servers' saturation for reference, and the p99 against the ceiling's, judged."""
        found = self.found
        rate = found.paced_rate
        lookups = next((name for name in found.serving if name.startswith("SKU")), "")
        expected = found.serving_setup.get("expected", {}).get(lookups, {})
        self.body += [
            f"The same mix paced at half ductwork's median saturated rate ({rate:,.0f} "
            "requests/s), by "
            "`bench/open_loop.py`: request *i* is due at *start + i / rate* whatever happened "
            "to those before it, and its latency runs from that due time, so waiting for a "
            "connection or behind a stalled answer counts (the coordinated-omission correction "
            f"plain `wrk` leaves out; {self.options.wrk_connections} keep-alive connections, "
            "taking turns). It sends what is due after each answer and otherwise sleeps until "
            "the next request is due, 1 ms at the least (uvloop's timers count whole "
            "milliseconds), so it never spins on a core the server needs; a request sent late "
            "still counts from its due time. Its own CPU share is the last column. "
            "Run with the generator sharing both cores with the server, then with the server's "
            "processes pinned to core 0 and the generator to core 1 (`taskset`), alternately. "
            "The ceiling rows are the same generator at the same rate against the ceiling: "
            "what the machine and the generator allow (the target is on ductwork's rows).",
            "",
        ]
        header = [*self.run_header("load"), "answered/s", "p50 ms", "generator CPU / wall",
                  *ANSWER_COLUMNS]  # fmt: skip
        self.body += table(header, self.paced_rows(expected))
        self.pinned_reference(rate)
        self.paced_verdict(expected)

    def paced_rows(self, expected: Mapping[str, float]) -> list[list[str]]:
        """A row per way of running the paced load (ductwork's, then the ceiling's), for
        the ways measured."""
        rows = []
        ways = (("shared", "cores shared"), ("pinned", "pinned apart"))
        for way, label in [*ways, *((f"ceiling {w}", f"ceiling, {t}") for w, t in ways)]:
            runs = self.found.paced.get(way, [])
            if not runs:
                continue
            rows.append(
                [
                    *self.row(f"{label}: p99 ms", [r["p99_ms"] for r in runs]),
                    f"{median(r['rps'] for r in runs):,.0f}",
                    f"{median(r['p50_ms'] for r in runs):.2f}",
                    _generator_share(runs),
                    *_answer_counts(runs, expected),
                ]
            )
        return rows

    def pinned_reference(self, rate: float) -> None:
        """The most each server answers on the one core the pinned runs leave it, and the
        paced ``rate``'s share of ductwork's (no target; nothing when not measured)."""
        saturation = self.found.pinned_saturation
        if not saturation:
            return
        self.body += [
            "For reference (no target), the most each server answers on the one core the "
            "runs pinned apart leave it: `wrk` at saturation on core 1, the server on core 0.",
            "",
        ]
        self.body += table(
            self.run_header("server"),
            [self.row(f"{name}, requests/s", rates, ",.0f") for name, rates in saturation.items()],
        )
        if "ductwork" in saturation:
            share = rate / median(saturation["ductwork"])
            self.body += [
                f"The paced rate is {share:.0%} of ductwork's rate on one core.",
                "",
            ]

    def paced_verdict(self, expected: Mapping[str, float]) -> None:
        """ductwork's paced p99 over the ceiling's at the same rate, cores shared, judged
        (nothing until both were measured)."""
        found = self.found
        ratio = paced_p99_ratio(found)
        if ratio is None:
            return
        held = all(answers_held(r, expected) for r in found.paced["shared"])
        word = self.verdict(
            "serving: lookup p99 at half ductwork's saturated rate / ceiling's p99 at that "
            "rate (cores shared)",
            f"{ratio:.2f}" if held else f"{ratio:.2f}, answers not as the mix asks",
            f"≤ {PACED_P99_RATIO_TARGET}",
            held and ratio <= PACED_P99_RATIO_TARGET,
        )
        self.body += [
            f"ductwork's p99 / the ceiling's at the same rate, cores shared = "
            f"**{ratio:.2f}** (target ≤ {PACED_P99_RATIO_TARGET}: {word}); the pinned rows "
            "are a reference.",
            "",
        ]
