"""The CRM family: /crm/v1.1 (lead list by cursor, lead details). Its stream's routes are made
from the registry (``serve.stream_routes``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ductwork.contract import paths
from serve.deps import require_key
from serve.openapi_docs import PROBLEM_ERRORS

router = APIRouter(
    prefix=paths.CRM_PREFIX,
    tags=["crm"],
    dependencies=[Depends(require_key)],
    responses=PROBLEM_ERRORS,
)
