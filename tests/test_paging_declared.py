"""A list's paging is data: the cursor walk and the updated-after walks page through a list
whose members and parameters are named otherwise than the leads' and the digital assets', from
its declaration alone, and keep their refusal rules there, naming its path.

The upstream is a small Starlette app served over real HTTP on a loopback port (the sandbox
serves only the spec's lists): a contact list paged by an (``enteredAt``, ``contactId``) cursor
in ``afterEntered`` and ``afterContact``, and a part list paged by number from a
``changedSince`` in (``changedAt``, ``partId``) order.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ductwork.streams import crm, data_warehouse
from ductwork.upstream.client import UpstreamClient, UpstreamContractError
from ductwork.upstream.cursor_walk import Cursor, walk_cursor
from ductwork.upstream.paging import CursorPaging, UpdatedAfterPaging
from ductwork.upstream.updated_after_walk import Key, PageWalkProgress, keyset_walk, page_walk
from sandbox.local_server import serving

T = TypeVar("T")
KEY = "paging-key"
CONTACTS = "/crm/v1.1/contacts"
PARTS = "/warehouse/v1.0/spare-parts"
PAGE = 40
CONTACT_PAGING = CursorPaging(
    CONTACTS,
    created_member="enteredAt",
    id_member="contactId",
    created_parameter="afterEntered",
    id_parameter="afterContact",
    created_after_parameter="enteredSince",
    noun="contacts",
    page_size=PAGE,
)
PART_PAGING = UpdatedAfterPaging(
    PARTS,
    updated_member="changedAt",
    id_member="partId",
    updated_after_parameter="changedSince",
    page_size=PAGE,
)
# Three records share each instant, so a cursor of the date-time alone would skip some.
CONTACT_RECORDS = [
    {"contactId": f"C{n:04}", "enteredAt": f"2026-03-01T08:{n // 3:02}:00.000Z"} for n in range(100)
]
PART_RECORDS = [
    {"partId": f"P{n:04}", "changedAt": f"2026-04-01T09:{n // 4:02}:00.000Z"} for n in range(90)
]


@dataclass
class Upstream:
    """The app's switch: whether the contact list ignores its cursor (answers page one again)."""

    ignore_cursor: bool = False


def _contacts(upstream: Upstream) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def contacts(request: Request) -> JSONResponse:
        query = request.query_params
        rows = CONTACT_RECORDS
        if "enteredSince" in query:
            rows = [r for r in rows if r["enteredAt"] > query["enteredSince"]]
        if "afterEntered" in query and not upstream.ignore_cursor:
            cursor = (query["afterEntered"], query["afterContact"])
            rows = [r for r in rows if (r["enteredAt"], r["contactId"]) > cursor]
        return JSONResponse({"success": True, "data": rows[: int(query["count"])]})

    return contacts


async def _parts(request: Request) -> JSONResponse:
    query = request.query_params
    count, page = int(query["count"]), int(query.get("page", "1"))
    rows = [r for r in PART_RECORDS if r["changedAt"] > query.get("changedSince", "")]
    pagination = {"totalItems": len(rows), "totalPages": -(-len(rows) // count)}
    return JSONResponse(
        {"success": True, "data": rows[(page - 1) * count : page * count], "pagination": pagination}
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Upstream]]:
    switch = Upstream()
    app = Starlette(
        routes=[Route(CONTACTS, _contacts(switch)), Route(PARTS, _parts)],
    )
    with serving(app) as url:
        yield url, switch
    switch.ignore_cursor = False


def _run(url: str, walk: Callable[[UpstreamClient], Awaitable[T]]) -> tuple[T, int]:
    """A walk against ``url`` on a fresh client; its result and the requests it sent."""

    async def go() -> tuple[T, int]:
        async with UpstreamClient(url, KEY, concurrency=4) as client:
            result = await walk(client)
            return result, client.stats.requests

    return asyncio.run(go())


class Pages:
    """What the sinks were handed, page by page."""

    def __init__(self) -> None:
        self.pages: list[list[dict[str, Any]]] = []
        self.cursors: list[Any] = []

    async def take(self, records: list[dict[str, Any]], cursor: Cursor | Key | None) -> None:
        self.pages.append(records)
        self.cursors.append(cursor)

    async def take_listed(
        self, records: list[dict[str, Any]], _listed: list[str], _p: PageWalkProgress
    ) -> None:
        self.pages.append(records)

    def ids(self, member: str) -> list[str]:
        return [record[member] for page in self.pages for record in page]


def test_a_cursor_walk_pages_a_list_by_the_members_and_parameters_its_paging_names(
    upstream: tuple[str, Upstream],
) -> None:
    url, _ = upstream
    sink = Pages()
    walk, requests = _run(url, lambda client: walk_cursor(client, CONTACT_PAGING, sink.take))
    assert sink.ids("contactId") == [r["contactId"] for r in CONTACT_RECORDS]
    assert [len(page) for page in sink.pages] == [40, 40, 20]
    assert requests == walk.pages == 3
    assert sink.cursors[0] == ("2026-03-01T08:13:00.000Z", "C0039")
    assert walk.last == ("2026-03-01T08:33:00.000Z", "C0099")

    # From a cursor in the middle of an instant's three contacts: the rest of them, and on.
    sink = Pages()
    _run(url, lambda client: walk_cursor(client, CONTACT_PAGING, sink.take, after=sink_at(40)))
    assert sink.ids("contactId") == [r["contactId"] for r in CONTACT_RECORDS[41:]]

    # A window read again: created after an instant, up to the cursor reached.
    sink = Pages()
    _run(
        url,
        lambda client: walk_cursor(
            client,
            CONTACT_PAGING,
            sink.take,
            created_after="2026-03-01T08:29:00.000Z",
            stop_at=sink_at(95),
        ),
    )
    assert sink.ids("contactId") == [r["contactId"] for r in CONTACT_RECORDS[90:96]]


def sink_at(index: int) -> Cursor:
    """The cursor just after contact ``index``."""
    return CONTACT_PAGING.cursor_of(CONTACT_RECORDS[index])


def test_a_list_that_ignores_its_declared_cursor_is_refused_naming_its_path_and_records(
    upstream: tuple[str, Upstream],
) -> None:
    url, switch = upstream
    switch.ignore_cursor = True
    sink = Pages()
    try:
        with pytest.raises(UpstreamContractError) as refused:
            _run(url, lambda client: walk_cursor(client, CONTACT_PAGING, sink.take))
    finally:
        switch.ignore_cursor = False
    assert str(refused.value) == (
        f"GET {CONTACTS}: refused, the cursor does not move forward: asked for contacts after "
        "(2026-03-01T08:13:00.000Z, C0039), the page lists (2026-03-01T08:00:00.000Z, C0000)"
    )
    assert [len(page) for page in sink.pages] == [40]


def test_both_updated_after_walks_page_a_list_by_the_members_and_parameter_its_paging_names(
    upstream: tuple[str, Upstream],
) -> None:
    url, _ = upstream
    sink = Pages()
    report, requests = _run(
        url, lambda client: page_walk(client, PART_PAGING, PageWalkProgress(None), sink.take_listed)
    )
    assert sink.ids("partId") == [r["partId"] for r in PART_RECORDS]
    assert report.consistent and report.totals == {90} and requests == 3
    assert report.last == ("2026-04-01T09:22:00.000Z", "P0089")

    # From a resume point: the parts after it, those of its own instant included.
    start = PART_PAGING.key_of(PART_RECORDS[49])
    sink = Pages()
    keyset, _ = _run(url, lambda client: keyset_walk(client, PART_PAGING, start, sink.take))
    assert sink.ids("partId") == [r["partId"] for r in PART_RECORDS[50:]]
    assert keyset.last == report.last
    assert sink.cursors[-1] == report.last


def test_updated_after_walks_that_need_no_ids_keep_none_and_say_so_when_asked(
    upstream: tuple[str, Upstream],
) -> None:
    url, _ = upstream
    sink = Pages()
    report, _ = _run(
        url,
        lambda client: page_walk(
            client, PART_PAGING, PageWalkProgress(None), sink.take_listed, keep_ids=False
        ),
    )
    # The walk is the same (every page, every record, its last key); only the ids are not held.
    assert sink.ids("partId") == [r["partId"] for r in PART_RECORDS]
    assert report.records == 90 and report.totals == {90} and report.ids is None
    assert report.last == ("2026-04-01T09:22:00.000Z", "P0089")
    with pytest.raises(ValueError, match="did not keep the ids"):
        _ = report.consistent
    keyset, _ = _run(
        url, lambda client: keyset_walk(client, PART_PAGING, None, Pages().take, keep_ids=False)
    )
    assert keyset.records == 90 and keyset.ids is None and keyset.last == report.last


def test_the_docs_show_the_paging_the_leads_and_the_digital_assets_declare() -> None:
    page = Path(__file__).parent.parent / "docs" / "adding-a-stream.md"
    section = page.read_text(encoding="utf-8").split("## A list that pages", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    leads, assets = block[1].split("DIGITAL_ASSET_PAGING = ")
    assert leads in Path(crm.__file__).read_text(encoding="utf-8")
    assert "DIGITAL_ASSET_PAGING = " + assets in Path(data_warehouse.__file__).read_text(
        encoding="utf-8"
    )
