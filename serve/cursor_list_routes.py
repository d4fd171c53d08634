"""The routes of a list paged by cursor (``Serving.CURSOR_LIST``): ``GET <path>`` with the
list's time filter, ``count`` and the two cursor parameters its paging names, and
``GET <path>/<id>`` for one record's details (the stream's ``served_detail`` statement).

The spec's one such list, the leads, also takes ``fields``, a projection of its list items
(``ductwork.contract.leads``); a record's details are answered as received, without envelope.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from ductwork.contract import envelopes, params
from ductwork.contract.encoding import dumps, epoch_micros, loads
from ductwork.contract.errors import cursor_incomplete, record_not_found
from ductwork.contract.leads import read_fields
from ductwork.streams.model import Stream
from ductwork.upstream.paging import CursorPaging
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep
from serve.openapi_docs import answer, record_of
from serve.responses import json_answer
from serve.route_signatures import path_parameter, query_parameter, with_signature
from warehouse_sql import stream_section


def add_routes(stream: Stream, router: APIRouter) -> None:
    """Add the list route and the details route of ``stream`` to its family's ``router``."""
    paging: CursorPaging = stream.steps[0].reader.paging  # type: ignore[attr-defined]
    _add_list(stream, paging, router)
    _add_details(stream, paging, router)


def _add_list(stream: Stream, paging: CursorPaging, router: APIRouter) -> None:
    """``GET <path>``: a page of the list after its cursor, projected by ``fields``."""

    async def list_records(request: Request, state: SnapshotDep, **given: Any) -> Response:
        keep = read_fields(given["fields"])
        after = params.read_datetime(paging.created_after_parameter, given["created_after"])
        size = params.read_count(given["count"])
        cursor_at_raw, cursor_id = given["cursor_created"], given["cursor_id"]
        if (cursor_at_raw is None) != (cursor_id is None):
            raise cursor_incomplete(paging.created_parameter, paging.id_parameter)
        cursor_at = params.read_datetime(paging.created_parameter, cursor_at_raw)
        listing = state.lists[stream.name]
        first = 0 if after is None else listing.after_time(epoch_micros(after))
        if cursor_at is not None and cursor_id is not None:
            first = max(first, listing.after_key(epoch_micros(cursor_at), cursor_id))
        records = await listing.page(first, min(first + size, len(listing)))
        if keep is not None:
            records = [_project(record, keep) for record in records]
        return json_answer(request, state, envelopes.data_list(records))

    with_signature(
        list_records,
        query_parameter("fields", description="Comma-separated list-item members."),
        query_parameter(paging.created_after_parameter, "created_after"),
        query_parameter("count", description="1 to 1000, default 100."),
        query_parameter(paging.created_parameter, "cursor_created"),
        query_parameter(paging.id_parameter, "cursor_id"),
    )
    members = f"({paging.created_member}, {paging.id_member})"
    list_shape = stream.steps[0].reader.shape  # type: ignore[attr-defined]
    router.add_api_route(
        stream.path.removeprefix(router.prefix),
        list_records,
        methods=["GET"],
        name=f"list_{stream.sql}",
        summary=f"{paging.noun.capitalize()} by {members}, cursor-paged",
        description=(
            f"`{paging.created_parameter}` and `{paging.id_parameter}` come together, meaning "
            f'"after the {paging.item} with this {members}": only one of them is a 400.'
        ),
        responses=answer(
            schemas.lookup({"type": "array", "items": record_of(stream, list_shape)}),
            f"{paging.item.capitalize()} list items as received, or their projection by "
            f"`fields` (`{paging.id_member}` and `{paging.created_member}` always kept).",
        ),
    )


def _project(record: bytes, keep: frozenset[str]) -> bytes:
    return dumps({k: v for k, v in loads(record).items() if k in keep})


def _add_details(stream: Stream, paging: CursorPaging, router: APIRouter) -> None:
    """``GET <path>/<id>``: one record's details, as received."""
    detail_sql = stream_section(stream.sql, "served_detail")
    id_name = f"{paging.item}_id"

    def get_record(request: Request, state: SnapshotDep, **given: str) -> Response:
        record_id = given[id_name]
        rows = state.reader.rows(detail_sql, [record_id])
        if not rows:
            raise record_not_found(paging.item, record_id)
        modified = state.times.of(stream.name, record_id)
        return json_answer(request, state, rows[0][0].encode(), modified)

    with_signature(get_record, path_parameter(id_name))
    router.add_api_route(
        f"{stream.path.removeprefix(router.prefix)}/{{{id_name}:path}}",
        get_record,
        methods=["GET"],
        name=f"get_{paging.item}",
        summary=f"One {paging.item}'s details",
        responses=answer(
            record_of(stream),
            f"The {paging.item} detail object as received (no envelope).",
        ),
    )
