"""The route of a list paged by number (``Serving.PAGED_LIST``): ``GET <path>`` with ``page``,
``count`` and the list's time filter (its paging's ``updated_after_parameter``, records updated
strictly later), each page sliced from the list's record file into the data warehouse's list
envelope. The short path (``serve.fast_answers``) answers the same requests through the same
``PagedList``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fastapi import APIRouter, Request, Response

from ductwork.contract import envelopes, params
from ductwork.contract.encoding import epoch_micros, format_datetime
from ductwork.streams.model import Serving, Stream
from ductwork.streams.registry import served_as
from ductwork.upstream.paging import UpdatedAfterPaging
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep
from serve.live_snapshot import ServingState
from serve.openapi_docs import answer, record_of
from serve.responses import json_answer
from serve.route_signatures import query_parameter, with_signature


class PagedList:
    """One list paged by number: the query it takes and how a page of it is read."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        paging = stream.steps[0].reader.paging  # type: ignore[attr-defined]
        assert isinstance(paging, UpdatedAfterPaging), stream.name
        self.paging = paging
        self.after_parameter = paging.updated_after_parameter
        self.parameters = frozenset({"page", "count", self.after_parameter})

    def read_query(self, given: Mapping[str, str | None]) -> tuple[int, int, datetime | None]:
        """``(page, count, updated after)`` from the query's raw values (ApiError when one is
        invalid)."""
        number, size = params.read_page(given.get("page")), params.read_count(given.get("count"))
        after = params.read_datetime(self.after_parameter, given.get(self.after_parameter))
        return number, size, after

    async def page(
        self, state: ServingState, number: int, size: int, after: datetime | None
    ) -> bytes:
        """Page ``number`` of ``size`` records updated strictly after ``after`` (all when
        None), in the envelope: the route's and the short path's one reading of the list."""
        listing = state.lists[self.stream.name]
        first = 0 if after is None else listing.after_time(epoch_micros(after))
        start, end = params.page_bounds(number, size)
        joined = await listing.joined(first + start, min(first + end, len(listing)))
        return envelopes.data_warehouse_list(
            [joined],
            params.pagination(number, size, len(listing) - first),
            {self.after_parameter: None if after is None else format_datetime(after)},
        )


# Every list paged by number, by its path.
PAGED_BY_NUMBER: dict[str, PagedList] = {
    stream.path: PagedList(stream) for stream in served_as(Serving.PAGED_LIST)
}


def add_routes(stream: Stream, router: APIRouter) -> None:
    """Add the list route of ``stream`` to its family's ``router``."""
    listed = PAGED_BY_NUMBER[stream.path]
    paging, after = listed.paging, listed.after_parameter

    async def list_records(request: Request, state: SnapshotDep, **given: str | None) -> Response:
        query = {"page": given["page"], "count": given["count"], after: given["updated_after"]}
        body = await listed.page(state, *listed.read_query(query))
        return json_answer(request, state, body)

    with_signature(
        list_records,
        query_parameter("page", description="Page number, from 1."),
        query_parameter("count", description="Page size, 1 to 1000."),
        query_parameter(after, "updated_after", "RFC 3339; strictly later."),
    )

    noun = stream.name.replace("-", " ").capitalize()
    router.add_api_route(
        stream.path.removeprefix(router.prefix),
        list_records,
        methods=["GET"],
        name=f"list_{stream.sql}",
        summary=f"{noun} by ({paging.updated_member}, {paging.id_member})",
        responses=answer(schemas.data_warehouse_list(record_of(stream))),
    )
