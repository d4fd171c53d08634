"""Starting the pim-image-sync job on request (the read API's /internal/v1.0/jobs path).

The job runs in a detached process on the Dagster instance under DUCTWORK_HOME, so it shows in
the UI. A file lock and a marker make concurrent calls agree: one starts a job, the others are
told how long the cooldown still lasts.
"""

from __future__ import annotations

import fcntl
import math
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from ductwork.settings import HomeSettings

JOB_NAME = "pim_image_sync"


@dataclass(frozen=True)
class Started:
    """A job that was just launched."""

    job_id: str
    started_at: datetime


@dataclass(frozen=True)
class Cooling:
    """A job started too recently; retry after this many seconds."""

    retry_after_s: int


def start_job(home: HomeSettings, cooldown_s: float) -> Started | Cooling:
    """Launch ``pim_image_sync`` unless one started less than ``cooldown_s`` ago."""
    home.home.mkdir(parents=True, exist_ok=True)
    marker = home.home / f"{JOB_NAME}.last-start"
    with open(home.home / f"{JOB_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            age = time.time() - marker.stat().st_mtime
        except FileNotFoundError:
            age = math.inf
        if age < cooldown_s:
            return Cooling(max(1, math.ceil(cooldown_s - age)))
        job_id = str(uuid.uuid4())
        subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "run-job", JOB_NAME, "--run-id", job_id],
            env={**os.environ, "DUCTWORK_HOME": str(home.home)},
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        marker.write_text(job_id, encoding="utf-8")
        return Started(job_id, datetime.now(UTC))
