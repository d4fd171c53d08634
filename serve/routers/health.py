"""Liveness, readiness (with the snapshot's age) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ductwork.contract.encoding import dumps
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
            "(``refused`` says why)."
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
    body: dict[str, object] = {
        "status": "ready",
        "snapshot": state.version,
        "age_seconds": round(live.age_seconds(state), 3),
    }
    if live.refusal is not None:  # still ready: the last good snapshot keeps being served
        body["refused"] = live.refusal
    fault = request.app.state.keys.fault
    if fault is not None:  # still ready: the keys last read keep being served
        body["key_file"] = fault.describe()
    return Response(content=dumps(body), media_type="application/json")


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
