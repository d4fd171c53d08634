"""The internal family: /internal/v1.0 (contractors, indoor models, manuals, image sync)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request, Response

from ductwork.contract import paths
from ductwork.contract.encoding import dumps, format_datetime
from ductwork.contract.errors import ApiError, ErrorCode, rate_limited
from serve.deps import SnapshotDep, require_key
from serve.job_trigger import Cooling, QueueUnavailable
from serve.openapi_docs import PROBLEM_ERRORS
from serve.rate_limit import client_of
from serve.responses import json_answer

router = APIRouter(
    prefix=paths.INTERNAL_PREFIX,
    tags=["internal"],
    responses=PROBLEM_ERRORS,
)
KeyRequired = [Depends(require_key)]
log = logging.getLogger("ductwork.serve")


@router.get("/accounts/contractors", dependencies=KeyRequired, summary="Contractors, reviews")
def contractors(request: Request, state: SnapshotDep) -> Response:
    if state.small.contractors is None:
        raise ApiError(ErrorCode.UNAVAILABLE, "Contractors have not been synced yet")
    return json_answer(request, state, state.small.contractors)


@router.get("/products/indoor-models", summary="Indoor models (no key; rate limited per client)")
async def indoor_models(request: Request, state: SnapshotDep) -> Response:
    client = client_of(request.client.host if request.client else "unknown")
    wait = await request.app.state.indoor_models_limit.check(client)
    if wait is not None:
        raise rate_limited(wait)
    return json_answer(request, state, state.small.indoor_models)


@router.get("/digital-assets", dependencies=KeyRequired, summary="Objects under manuals/")
def manuals(request: Request, state: SnapshotDep) -> Response:
    return json_answer(request, state, state.small.manuals)


@router.get("/jobs/pim-image-sync", dependencies=KeyRequired, summary="Start the image sync")
async def pim_image_sync(request: Request) -> Response:
    try:
        outcome = await request.app.state.job_trigger.start()
    except QueueUnavailable as exc:
        raise ApiError(
            ErrorCode.UNAVAILABLE, f"The image sync could not be started: {exc}"
        ) from None
    if isinstance(outcome, Cooling):
        raise rate_limited(outcome.retry_after_s, "An image sync started recently")
    body = {
        "success": True,
        "jobId": outcome.job_id,
        "status": "started",
        "startedAt": format_datetime(outcome.started_at),
    }
    return Response(content=dumps(body), media_type="application/json")
