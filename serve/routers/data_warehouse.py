"""The data warehouse family: /warehouse/v1.0 (digital assets, submittal data)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ductwork.contract import envelopes, params, paths
from ductwork.contract.encoding import epoch_micros, format_datetime
from ductwork.contract.errors import lookup_not_found, lookup_params_missing
from ductwork.streams.registry import DIGITAL_ASSETS, SUBMITTALS
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep, require_key
from serve.live_snapshot import ServingState
from serve.openapi_docs import DATA_WAREHOUSE_ERRORS, answer, record_of
from serve.responses import json_answer

router = APIRouter(
    prefix=paths.DATA_WAREHOUSE_PREFIX,
    tags=["warehouse"],
    dependencies=[Depends(require_key)],
    responses=DATA_WAREHOUSE_ERRORS,
)


@router.get(
    "/digital-assets",
    summary="Digital assets by (updatedAt, assetId)",
    responses=answer(schemas.data_warehouse_list(record_of(DIGITAL_ASSETS))),
)
async def list_digital_assets(
    request: Request,
    state: SnapshotDep,
    page: Annotated[str | None, Query(description="Page number, from 1.")] = None,
    count: Annotated[str | None, Query(description="Page size, 1 to 1000.")] = None,
    updated_after: Annotated[
        str | None, Query(alias="updatedAfter", description="RFC 3339; strictly later.")
    ] = None,
) -> Response:
    number, size = params.read_page(page), params.read_count(count)
    after = params.read_datetime("updatedAfter", updated_after)
    body = await digital_assets_page(state, number, size, after)
    return json_answer(request, state, body)


async def digital_assets_page(
    state: ServingState, number: int, size: int, after: datetime | None
) -> bytes:
    """Page ``number`` of ``size`` digital assets updated strictly after ``after`` (all when
    None), in the envelope: the routes' and the short path's one reading of the list."""
    listing = state.lists[DIGITAL_ASSETS.name]
    first = 0 if after is None else listing.after_time(epoch_micros(after))
    start, end = params.page_bounds(number, size)
    joined = await listing.joined(first + start, min(first + end, len(listing)))
    return envelopes.data_warehouse_list(
        [joined],
        params.pagination(number, size, len(listing) - first),
        {"updatedAfter": None if after is None else format_datetime(after)},
    )


@router.get(
    "/submittal-data",
    summary="Submittal data for an indoor and/or outdoor SRN",
    description=(
        "At least one of `idu` and `odu` is required (an empty value counts as absent): "
        "neither is a 400. Unknown combination: 404 with `data: {}`."
    ),
    responses=answer(schemas.lookup(record_of(SUBMITTALS))),
)
def submittal_data(
    request: Request,
    state: SnapshotDep,
    idu: Annotated[str | None, Query(description="Indoor unit SRN.")] = None,
    odu: Annotated[str | None, Query(description="Outdoor unit SRN.")] = None,
) -> Response:
    idu, odu = idu or None, odu or None
    if idu is None and odu is None:
        raise lookup_params_missing(("idu", "odu"))
    record = state.small.lookups[SUBMITTALS.name].get((idu, odu))
    if record is None:
        raise lookup_not_found("submittal data")
    modified = state.times.of(SUBMITTALS.name, f"{idu or ''}|{odu or ''}")
    return json_answer(request, state, envelopes.product_lookup(record), modified)
