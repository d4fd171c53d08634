"""Liveness, readiness (with the snapshot's age) and Prometheus metrics."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ductwork.contract.encoding import dumps, format_datetime
from serve import openapi_schemas as schemas
from serve.deps import require_ops
from serve.openapi_docs import answer

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process answers", responses=answer(schemas.HEALTH))
async def healthz() -> Response:
    return Response(content=b'{"status":"ok"}', media_type="application/json")


@router.get(
    "/readyz",
    summary="A snapshot is loaded; its version and age",
    responses={
        **answer(schemas.READY),
        503: {
            "description": "No snapshot has been published yet (or, on a replica, fetched from "
            "the object store and loaded yet), or the only one there was refused "
            "(``refused`` says why), or, with DUCTWORK_SERVE_MAX_AGE_S set, a stream last "
            "synced longer ago than that (``status`` is ``stale``, ``stale`` names them)."
        },
    },
)
async def readyz(request: Request) -> Response:
    live = request.app.state.live
    state = live.get()
    if state is None:
        body = {"status": "no snapshot loaded yet"}
        if live.refusal is not None:
            body["refused"] = live.refusal
        return Response(content=dumps(body), status_code=503, media_type="application/json")
    synced = live.sync_times(state)
    body: dict[str, object] = {
        "status": "ready",
        "snapshot": state.version,
        "age_seconds": round(live.age_seconds(state), 3),
        "synced_at": {name: format_datetime(_utc(moment)) for name, moment in synced.items()},
    }
    max_age_s = request.app.state.config.serve.serve_max_age_s
    too_old = sorted(name for name, at in synced.items() if _older(at, max_age_s))
    if too_old:  # the data is past its maximum age: take this replica out of service
        body["status"] = "stale"
        body["stale"] = too_old
    if live.refusal is not None:  # still ready: the last good snapshot keeps being served
        body["refused"] = live.refusal
    fault = request.app.state.keys.fault
    if fault is not None:  # still ready: the keys last read keep being served
        body["key_file"] = fault.describe()
    status = 503 if too_old else 200
    return Response(content=dumps(body), status_code=status, media_type="application/json")


def _utc(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def _older(synced: float, max_age_s: float | None) -> bool:
    """Whether data synced at ``synced`` is past ``max_age_s`` (never, without one)."""
    return max_age_s is not None and time.time() - synced > max_age_s


@router.get(
    "/metrics",
    summary="Prometheus metrics of every worker (a key with the ops scope, unless public)",
    response_class=PlainTextResponse,
    dependencies=[Depends(require_ops)],
)
async def metrics(request: Request) -> Response:
    live = request.app.state.live
    state = live.get()
    metrics = request.app.state.metrics
    metrics.flush()  # this worker's latest answers, counted before they are reported
    metrics.snapshot_age.set(live.age_seconds(state) if state is not None else float("nan"))
    body = generate_latest(metrics.registry)
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
