"""What the suite measured, by part: the findings ``bench.results`` renders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.measuring import Measured

GIB = 1024**3
MIB = 1024**2


@dataclass
class SyncRun:
    """One whole ``ductwork sync`` process: its wall time from outside, peak RSS, the
    upstream requests it made and each step's seconds from its own output; its CPU time and the
    upstream's meanwhile (the replay's for a full sync, the sandbox's otherwise), and the
    replay's misses."""

    seconds: float
    peak_rss: int
    requests: int
    home: Path
    steps: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    replay_misses: int = 0

    @property
    def publish_s(self) -> float:
        return self.steps.get("serving_snapshot", math.nan)


@dataclass
class Findings:
    """Everything measured, by part."""

    raw_floor: dict[str, list[float]] = field(default_factory=dict)
    aiohttp_floor: dict[str, list[float]] = field(default_factory=dict)
    # scale -> the land-and-model floor's seconds, per run, and each run's report (its parts'
    # seconds and CPU seconds, what it landed and modelled)
    land_floor: dict[str, list[float]] = field(default_factory=dict)
    land_floor_reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    floor_requests: dict[str, int] = field(default_factory=dict)
    # client ("raw", "aiohttp", "land") -> the floor process's CPU seconds, and the upstream's (the
    # replay's), per run
    floor_cpu: dict[str, list[float]] = field(default_factory=dict)
    floor_upstream_cpu: dict[str, list[float]] = field(default_factory=dict)
    # scale -> seconds from the start of recording the sandbox's answers to the replay answering
    replay_recording_s: dict[str, float] = field(default_factory=dict)
    # scale -> run ("raw floor", "aiohttp floor", "full sync") -> the replay's misses, per run:
    # requests it had no recorded answer for (404s the run was given instead of the sandbox's
    # answer). Any miss is also in ``notes``.
    replay_misses: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    full: dict[str, list[SyncRun]] = field(default_factory=dict)
    # scale -> the full sync against the sandbox itself, where the full syncs ran against the
    # replay: the data folder of the incremental runs, and the sync that the dlt peer and the
    # large scale (both against the sandbox) are compared with.
    sandbox_full: dict[str, SyncRun] = field(default_factory=dict)
    peer: dict[str, list[Measured]] = field(default_factory=dict)
    # scale -> ductwork's full sync against the sandbox run just before each dlt run, on a
    # fresh data folder: the two sides of the peer's ratio minutes apart, not a quarter hour.
    peer_ours: dict[str, list[SyncRun]] = field(default_factory=dict)
    peer_requests: dict[str, int] = field(default_factory=dict)
    startup_floor: list[float] = field(default_factory=list)
    startup_floor_rss: list[int] = field(default_factory=list)
    startup_floor_cpu: list[float] = field(default_factory=list)
    noop_run: list[float] = field(default_factory=list)
    noop_run_cpu: list[float] = field(default_factory=list)
    no_change: list[SyncRun] = field(default_factory=list)
    changed: list[SyncRun] = field(default_factory=list)
    mutation: dict[str, int] = field(default_factory=dict)
    # mix name -> server -> runs (wrk, closed loop, saturation)
    serving: dict[str, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    serving_setup: dict[str, Any] = field(default_factory=dict)
    # The lookup mix paced at half ductwork's saturated rate (open loop), against ductwork and
    # against the ceiling at that same rate: "shared" cores or "pinned" (the ceiling's
    # prefixed "ceiling ").
    paced_rate: float = 0.0
    paced: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # "ductwork" or "ceiling" -> wrk's requests/s with the server pinned to core 0, wrk to 1
    pinned_saturation: dict[str, list[float]] = field(default_factory=dict)
    startup: dict[str, float] = field(default_factory=dict)
    # The mirror's memory (``bench.memory``): its syncs, sizes and serving figures.
    history: Any = None
    # ``ductwork forget`` of one lead on the memory part's data folder (``bench.forget``), or
    # the error that stopped it.
    forget: Any = None
    # Wall time of each part of the suite, for where its budget goes.
    part_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
