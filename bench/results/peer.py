"""Section 4 of the results file: the dlt ``rest_api`` peer against ``ductwork sync``."""

from __future__ import annotations

from bench.findings import MIB
from bench.results.report_base import ReportBase
from bench.results.tables import median, table
from bench.results.targets import DLT_WALL_TARGET


class PeerSection(ReportBase):
    """4. dlt ``rest_api`` peer vs ``ductwork sync``."""

    def peer(self) -> None:
        """dlt's runs beside ductwork's syncs against the sandbox, the wall ratio judged."""
        scale = self.first
        peer = self.found.peer.get(scale, [])
        # dlt fetches from the sandbox: it is compared with ductwork's syncs against the
        # sandbox run beside it (the sandbox full sync of section 1 for a run without them).
        base = self.found.sandbox_full.get(scale)
        ours = self.found.peer_ours.get(scale) or ([base] if base is not None else [])
        ours = ours or self.found.full.get(scale, [])
        if not ours:
            return
        self.body += [f"### 4. dlt `rest_api` peer vs `ductwork sync`, scale `{scale}`", ""]
        target = f"≥ {DLT_WALL_TARGET:g}"
        if not peer:
            self.body += ["dlt was not run (`--dlt-runs 0`): the dlt target missed.", ""]
            self.verdict(f"dlt / ductwork, wall ({scale})", "not run", target, False)
            return
        seconds = [m.report["seconds"] for m in peer]
        rss = [m.peak_rss / MIB for m in peer]
        rows = [self.row("dlt, s", seconds, ".1f"), self.row("dlt peak RSS, MiB", rss, ".0f")]
        for step in ("extract", "normalize", "load"):
            values = [m.report.get("steps", {}).get(step, float("nan")) for m in peer]
            rows.append(self.row(f"dlt {step}, s", values, ".1f"))
        rows += [
            self.row("`ductwork sync`, s", [r.seconds for r in ours], ".1f"),
            self.row("`ductwork sync` peak RSS, MiB", [r.peak_rss / MIB for r in ours], ".0f"),
        ]
        self.body += [
            "dlt tuned as its documentation allows: `parallelized: True` on every resource, 8 "
            "extract workers, `max_table_nesting=0`, Parquet load files (`bench/dlt_peer.py`). "
            "Both fetch from the sandbox itself (dlt's requests are not the sync's, so the "
            "replay has no answers for them); ductwork's rows are its full syncs against the "
            "sandbox, each on a fresh data folder just before a dlt run, so that the two sides "
            "of the ratio meet the machine as it is at that moment. "
            f"Upstream requests: dlt {self.found.peer_requests.get(scale, 0):,}, "
            f"ductwork {ours[-1].requests:,}.",
            "",
        ]
        self.body += table(self.run_header("run"), rows)
        wall = median(seconds) / median(r.seconds for r in ours)
        memory = median(m.peak_rss for m in peer) / median(r.peak_rss for r in ours)
        a = self.verdict(
            f"dlt / ductwork, wall ({scale})", f"{wall:.2f}", target, wall >= DLT_WALL_TARGET
        )
        self.body += [
            f"dlt / ductwork: wall **{wall:.2f}** ({target}: {a}); peak RSS {memory:.2f} (no "
            "target: issue 45 dropped it, as a process that only imports dagster and duckdb "
            "already peaks above a tenth of dlt's peak).",
            "",
        ]
        if self.found.startup_floor_rss:
            floor = median(self.found.startup_floor_rss) / MIB
            self.body += [
                f"For reference: the start-up floor of section 3 (a process that only imports "
                f"dagster and duckdb) peaks at {floor:.0f} MiB.",
                "",
            ]
