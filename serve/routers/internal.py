"""The internal family: /internal/v1.0. Its streams are documents, whose routes are made from
the registry (``serve.document_routes``); this router adds the image sync's trigger."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request, Response

from ductwork.contract import paths
from ductwork.contract.encoding import dumps, format_datetime
from ductwork.contract.errors import ApiError, ErrorCode, rate_limited
from serve import openapi_schemas as schemas
from serve.deps import require_key
from serve.job_trigger import Cooling, QueueUnavailable
from serve.openapi_docs import PROBLEM_ERRORS, answer

# No key required by the router itself: a stream the spec declares open is served without one.
router = APIRouter(
    prefix=paths.INTERNAL_PREFIX,
    tags=["internal"],
    responses=PROBLEM_ERRORS,
)
KeyRequired = [Depends(require_key)]
log = logging.getLogger("ductwork.serve")


@router.get(
    "/jobs/pim-image-sync",
    dependencies=KeyRequired,
    summary="Start the image sync",
    responses=answer(schemas.JOB_STARTED),
)
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
