"""The CRM family: /crm/v1.1 (lead list by cursor, lead details)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ductwork.contract import envelopes, params, paths
from ductwork.contract.encoding import dumps, epoch_micros, loads
from ductwork.contract.errors import cursor_incomplete, record_not_found
from ductwork.contract.leads import read_fields
from ductwork.streams.crm import LEAD_RECORD
from ductwork.streams.registry import LEADS
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep, require_key
from serve.openapi_docs import PROBLEM_ERRORS, answer, record_of
from serve.responses import json_answer
from warehouse_sql import stream_section

router = APIRouter(
    prefix=paths.CRM_PREFIX,
    tags=["crm"],
    dependencies=[Depends(require_key)],
    responses=PROBLEM_ERRORS,
)

DETAIL_SQL = stream_section(LEADS.sql, "served_detail")


@router.get(
    "/leads",
    summary="Leads by (CreatedDate, Id), cursor-paged",
    description=(
        '`cursorCreatedDate` and `cursorId` come together, meaning "after the lead with this '
        '(CreatedDate, Id)": only one of them is a 400.'
    ),
    responses=answer(
        schemas.lookup({"type": "array", "items": record_of(LEADS, LEAD_RECORD)}),
        "Lead list items as received, or their projection by `fields` (`Id` and "
        "`CreatedDate` always kept).",
    ),
)
async def list_leads(
    request: Request,
    state: SnapshotDep,
    fields: Annotated[str | None, Query(description="Comma-separated list-item members.")] = None,
    created_after: Annotated[str | None, Query(alias="createdAfter")] = None,
    count: Annotated[str | None, Query(description="1 to 1000, default 100.")] = None,
    cursor_created_date: Annotated[str | None, Query(alias="cursorCreatedDate")] = None,
    cursor_id: Annotated[str | None, Query(alias="cursorId")] = None,
) -> Response:
    keep = read_fields(fields)
    after = params.read_datetime("createdAfter", created_after)
    size = params.read_count(count)
    if (cursor_created_date is None) != (cursor_id is None):
        raise cursor_incomplete()
    cursor_at = params.read_datetime("cursorCreatedDate", cursor_created_date)
    leads = state.lists[LEADS.name]
    first = 0 if after is None else leads.after_time(epoch_micros(after))
    if cursor_at is not None and cursor_id is not None:
        first = max(first, leads.after_key(epoch_micros(cursor_at), cursor_id))
    records = await leads.page(first, min(first + size, len(leads)))
    if keep is not None:
        records = [_project(record, keep) for record in records]
    return json_answer(request, state, envelopes.data_list(records))


def _project(record: bytes, keep: frozenset[str]) -> bytes:
    return dumps({k: v for k, v in loads(record).items() if k in keep})


@router.get(
    "/leads/{lead_id:path}",
    summary="One lead's details",
    responses=answer(record_of(LEADS), "The lead detail object as received (no envelope)."),
)
def get_lead(request: Request, state: SnapshotDep, lead_id: str) -> Response:
    rows = state.reader.rows(DETAIL_SQL, [lead_id])
    if not rows:
        raise record_not_found("lead", lead_id)
    modified = state.times.of(LEADS.name, lead_id)
    return json_answer(request, state, rows[0][0].encode(), modified)
