"""Starting the pim-image-sync job on request (the read API's /internal/v1.0/jobs path).

The read API does not run the job: it submits a run to the Dagster instance's run queue
through the webserver's GraphQL API (DUCTWORK_DAGSTER_URL), and the daemon launches it when
the warehouse is free, like any scheduled run. So this process needs neither the upstream's key
nor the object store's credentials.

The cooldown is read from the run queue itself: the newest ``pim_image_sync`` run not canceled,
by the creation time the webserver reports. Every worker of every replica asks the same queue,
so they all agree. Two calls at the same moment (in two replicas) may both find no recent run
and both submit one; each then reads the queue again, and the run created first within the
cooldown stands: a later one is canceled while still queued, and its caller is told how long
to wait, as any other caller is.

Everything here is asynchronous and bounded in time (``SUBMIT_TIMEOUT_S``): no thread waits on
the webserver, and a worker's calls take their turn on an ``asyncio`` lock, so that one worker
does not submit runs only to cancel them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

JOB_NAME = "pim_image_sync"
SUBMIT_TIMEOUT_S = 15.0
# Runs that still count for the cooldown: every status but the canceled ones.
COUNTING_STATUSES = (
    "QUEUED", "NOT_STARTED", "MANAGED", "STARTING", "STARTED", "SUSPENDED", "SUCCESS", "FAILURE",
)  # fmt: skip
# Enough to see every run a burst of calls could create within one cooldown.
RECENT_RUNS = 50

log = logging.getLogger("ductwork.serve")

_RECENT_RUNS_QUERY = """
query RecentRuns($filter: RunsFilter!, $limit: Int!) {
  runsOrError(filter: $filter, limit: $limit) {
    __typename
    ... on Runs { results { runId creationTime } }
    ... on Error { message }
  }
}
"""
_JOB_LOCATIONS_QUERY = """
query JobLocations {
  repositoriesOrError {
    __typename
    ... on RepositoryConnection { nodes { name location { name } pipelines { name } } }
    ... on Error { message }
  }
}
"""
_LAUNCH_MUTATION = """
mutation LaunchRun($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId creationTime } }
    ... on Error { message }
  }
}
"""
_CANCEL_MUTATION = """
mutation CancelRun($runId: String!) {
  terminateRun(runId: $runId) {
    __typename
    ... on Error { message }
  }
}
"""


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


@dataclass(frozen=True)
class _Run:
    run_id: str
    created: float  # seconds since the epoch, as the instance recorded it


class JobTrigger:
    """Queues ``pim_image_sync`` through the webserver at ``dagster_url``, at most once per
    ``cooldown_s`` as the run queue tells it."""

    def __init__(self, dagster_url: str, cooldown_s: float) -> None:
        self._graphql_url = dagster_url.rstrip("/") + "/graphql"
        self._cooldown_s = cooldown_s
        self._turn = asyncio.Lock()

    async def start(self) -> Started | Cooling:
        """Queue a run unless one was queued less than the cooldown ago; QueueUnavailable when
        the webserver cannot be asked or refuses, within ``SUBMIT_TIMEOUT_S`` in all."""
        try:
            async with asyncio.timeout(SUBMIT_TIMEOUT_S):
                async with self._turn, httpx.AsyncClient(timeout=SUBMIT_TIMEOUT_S) as client:
                    return await self._start(client)
        except TimeoutError:
            raise QueueUnavailable("the run queue did not answer in time") from None
        except httpx.HTTPError as exc:
            kind = type(exc).__name__
            raise QueueUnavailable(f"the run queue is not reachable ({kind})") from None
        except (ValueError, KeyError, TypeError):  # no JSON, or not the answer asked for
            raise QueueUnavailable("the run queue gave an answer it should not") from None

    async def _start(self, client: httpx.AsyncClient) -> Started | Cooling:
        recent = await self._recent_runs(client)
        if recent:
            return self._cooling(max(run.created for run in recent))
        ours = await self._launch(client)
        # Another replica may have queued one meanwhile: the first created stands.
        rivals = [run for run in await self._recent_runs(client) if run.run_id != ours.run_id]
        first = min([ours, *rivals], key=lambda run: (run.created, run.run_id))
        if first is not ours:
            await self._cancel(client, ours.run_id)
            return self._cooling(first.created)
        return Started(ours.run_id, datetime.fromtimestamp(ours.created, UTC))

    def _cooling(self, created: float) -> Cooling:
        left = self._cooldown_s - (time.time() - created)
        return Cooling(max(1, math.ceil(left)))

    async def _recent_runs(self, client: httpx.AsyncClient) -> list[_Run]:
        """The job's runs created within the cooldown, not canceled, newest first."""
        run_filter = {"pipelineName": JOB_NAME, "statuses": list(COUNTING_STATUSES)}
        variables = {"filter": run_filter, "limit": RECENT_RUNS}
        answer = (await _ask(client, self._graphql_url, _RECENT_RUNS_QUERY, variables))[
            "runsOrError"
        ]
        if answer["__typename"] != "Runs":
            raise QueueUnavailable(f"the run queue did not list its runs: {answer['__typename']}")
        horizon = time.time() - self._cooldown_s
        runs = [_Run(run["runId"], float(run["creationTime"])) for run in answer["results"]]
        return [run for run in runs if run.created > horizon]

    async def _launch(self, client: httpx.AsyncClient) -> _Run:
        locations = (await _ask(client, self._graphql_url, _JOB_LOCATIONS_QUERY, {}))[
            "repositoriesOrError"
        ]
        if locations["__typename"] != "RepositoryConnection":
            raise QueueUnavailable(f"the run queue did not take the run: {locations['__typename']}")
        holders = [
            node
            for node in locations["nodes"]
            if any(job["name"] == JOB_NAME for job in node["pipelines"])
        ]
        if len(holders) != 1:
            raise QueueUnavailable(f"the run queue knows {len(holders)} jobs named {JOB_NAME}")
        params = {
            "selector": {
                "repositoryLocationName": holders[0]["location"]["name"],
                "repositoryName": holders[0]["name"],
                "pipelineName": JOB_NAME,
            },
            "runConfigData": {},
            "mode": "default",
            "executionMetadata": {"tags": [{"key": "ductwork/started-by", "value": "read-api"}]},
        }
        launched = (
            await _ask(client, self._graphql_url, _LAUNCH_MUTATION, {"executionParams": params})
        )["launchRun"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise QueueUnavailable(f"the run queue did not take the run: {launched['__typename']}")
        run = launched["run"]
        return _Run(run["runId"], float(run["creationTime"]))

    async def _cancel(self, client: httpx.AsyncClient, run_id: str) -> None:
        answer = (await _ask(client, self._graphql_url, _CANCEL_MUTATION, {"runId": run_id}))[
            "terminateRun"
        ]
        if answer["__typename"] != "TerminateRunSuccess":
            # Two runs stay queued; the daemon runs them one after the other.
            log.warning("could not cancel the surplus run %s (%s)", run_id, answer["__typename"])


async def _ask(
    client: httpx.AsyncClient, url: str, query: str, variables: dict[str, Any]
) -> dict[str, Any]:
    """The ``data`` of a GraphQL answer; QueueUnavailable for an answer with errors. The
    webserver answers a result that is an error (``PythonError``) with a 500 and its data."""
    answer = await client.post(url, json={"query": query, "variables": variables})
    if answer.headers.get("content-type", "").startswith("application/json"):
        body = answer.json()
        if isinstance(body.get("data"), dict) and not body.get("errors"):
            return body["data"]
    answer.raise_for_status()
    raise QueueUnavailable(f"the run queue refused the request (HTTP {answer.status_code})")
