"""Starting the pim-image-sync job on request (the read API's /internal/v1.0/jobs path).

The read API does not run the job: it submits a run to the Dagster instance's run queue
through the webserver's GraphQL API (DUCTWORK_DAGSTER_URL), and the daemon launches it when
the warehouse is free, like any scheduled run. So this process needs neither the upstream's key
nor the object store's credentials. A file lock and a marker make concurrent calls, in every
worker, agree: one submits a run, the others are told how long the cooldown still lasts.
"""

from __future__ import annotations

import fcntl
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

JOB_NAME = "pim_image_sync"
SUBMIT_TIMEOUT_S = 15


@dataclass(frozen=True)
class Started:
    """A run that was just queued."""

    job_id: str
    started_at: datetime


@dataclass(frozen=True)
class Cooling:
    """A job started too recently; retry after this many seconds."""

    retry_after_s: int


class QueueUnavailable(RuntimeError):
    """The run queue could not take the run (webserver down, or it refused the job)."""


def start_job(home: Path, cooldown_s: float, dagster_url: str) -> Started | Cooling:
    """Queue ``pim_image_sync`` unless one was queued less than ``cooldown_s`` ago."""
    home.mkdir(parents=True, exist_ok=True)
    marker = home / f"{JOB_NAME}.last-start"
    with open(home / f"{JOB_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            age = time.time() - marker.stat().st_mtime
        except FileNotFoundError:
            age = math.inf
        if age < cooldown_s:
            return Cooling(max(1, math.ceil(cooldown_s - age)))
        run_id = submit_run(dagster_url, JOB_NAME)
        marker.write_text(run_id, encoding="utf-8")
        return Started(run_id, datetime.now(UTC))


def submit_run(dagster_url: str, job_name: str) -> str:
    """Submit a run of ``job_name`` to the instance behind the webserver; its run id."""
    # Imported on first use: it brings Dagster's client, which no other request needs.
    from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

    url = urlsplit(dagster_url)
    if not url.hostname:
        raise QueueUnavailable("DUCTWORK_DAGSTER_URL names no host")
    client = DagsterGraphQLClient(
        url.hostname,
        port_number=url.port,
        use_https=url.scheme == "https",
        timeout=SUBMIT_TIMEOUT_S,
    )
    try:
        return client.submit_job_execution(job_name, tags={"ductwork/started-by": "read-api"})
    except DagsterGraphQLClientError as exc:
        # The message names the failure's kind; it carries no secret (the URL holds none).
        raise QueueUnavailable(f"the run queue did not take the run: {exc.args[0]}") from None
    except Exception as exc:  # the client's transport raises its library's own errors
        raise QueueUnavailable(f"the run queue is not reachable ({type(exc).__name__})") from None
