"""The data warehouse family: /warehouse/v1.0 (digital assets, submittal data). Its streams'
routes are made from the registry (``serve.stream_routes``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ductwork.contract import paths
from serve.deps import require_key
from serve.openapi_docs import DATA_WAREHOUSE_ERRORS

router = APIRouter(
    prefix=paths.DATA_WAREHOUSE_PREFIX,
    tags=["warehouse"],
    dependencies=[Depends(require_key)],
    responses=DATA_WAREHOUSE_ERRORS,
)
