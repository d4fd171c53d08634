"""The sandbox upstream as a plain ASGI app: every path of the spec, per the wire contract.

Parameter rules, error bodies and envelopes all come from ``ductwork.contract``, which the
read API uses too; answers are joined from pre-serialised record bytes.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import random
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from starlette.datastructures import QueryParams

from ductwork.contract import envelopes, params, paths
from ductwork.contract.encoding import dumps, format_datetime, loads
from ductwork.contract.errors import (
    ApiError,
    ErrorCode,
    cursor_incomplete,
    lookup_not_found,
    lookup_params_missing,
    no_such_path,
    product_not_found,
    rate_limited,
    record_not_found,
    render,
    unauthorized,
    unit_not_found,
    unknown_category,
)
from ductwork.contract.leads import read_fields
from ductwork.streams.registry import (
    CONTRACTORS,
    INDOOR_MODELS,
    MANUALS,
    PAIRINGS,
    STREAMS,
    SUBMITTALS,
)
from sandbox.asgi import Answer, Receive, Scope, Send, header, send_answer, serve_lifespan
from sandbox.lead_id_forms import SHORT_LENGTH, full_id, with_short_id
from sandbox.manuals import list_manuals
from sandbox.media import image_png
from sandbox.odd_media import ODD_MEDIA_PREFIX, serve_odd_media
from sandbox.state import SandboxState
from sandbox.timestamp_styles import styled_record

Handler = Callable[[SandboxState, QueryParams, str], bytes]
ADMIN_PREFIX = "/_sandbox/"
MEDIA_PREFIX = "/media/images/"
OPEN_PATHS = frozenset(stream.path for stream in STREAMS if stream.open_access)
LATEST = "\U0010ffff"  # sorts after every id: "strictly after this instant"
# What a list reports under the ``endless_pages`` switch.
ENDLESS_PAGES = 1_000_000_000
log = logging.getLogger("sandbox")


def _listed_page(state: SandboxState, page: int) -> int:
    """The page a page-number list answers with: the one asked for, or always the first
    under ``endless_pages`` (a list that ignores ``page``)."""
    return 1 if state.faults.endless_pages else page


def _pagination(state: SandboxState, page: int, count: int, total: int) -> dict[str, int]:
    """The contract's pagination, or under ``endless_pages`` totals of a billion pages (which
    agree with each other, as a list that never ends would report them)."""
    if state.faults.endless_pages:
        return {
            "page": page,
            "count": count,
            "totalItems": ENDLESS_PAGES * count,
            "totalPages": ENDLESS_PAGES,
        }
    return params.pagination(page, count, total)


def _page(
    state: SandboxState, bodies: list[bytes], page: int, count: int, envelope: Callable
) -> bytes:
    start, end = params.page_bounds(_listed_page(state, page), count)
    return envelope(bodies[start:end], _pagination(state, page, count, len(bodies)))


# ---- products ---------------------------------------------------------------------------


def products(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """``/products``: catalog items in SKU order, optionally of one type."""
    category = query.get("category")
    if category is not None and category not in paths.UNIT_SLUGS:
        raise unknown_category(paths.UNIT_SLUGS)
    count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
    view = state.view()
    items = view.items if category is None else view.items_by_slug[category]
    return _page(state, items, page, count, envelopes.product_list)


def unit_list(slug: str) -> Handler:
    """The typed list of one unit type, with its three case-insensitive filters."""

    def handler(state: SandboxState, query: QueryParams, _: str) -> bytes:
        wanted = (
            params.read_filter(query.get("series.name")),
            params.read_filter(query.get("family.name")),
            params.read_filter(query.get("brand")),
        )
        count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
        bodies = state.view().typed[slug].matching(wanted)
        return _page(state, bodies, page, count, envelopes.product_list)

    return handler


def unit_lookup(slug: str) -> Handler:
    """The typed lookup of one unit type: 404 for a SKU of another type."""

    def handler(state: SandboxState, query: QueryParams, sku: str) -> bytes:
        body = state.view().typed[slug].by_sku.get(sku)
        if body is None:
            raise unit_not_found(slug, sku)
        return envelopes.product_lookup(body)

    return handler


def resolve_unit(state: SandboxState, query: QueryParams, sku: str) -> bytes:
    """``/units/{sku}``: the unit's record whatever its type."""
    body = state.view().resolver.get(sku)
    if body is None:
        raise product_not_found(sku)
    return envelopes.product_lookup(body)


def pairings(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """``/pairings``: by relationshipId, filtered by a SKU in any position and by relType."""
    sku = query.get("sku") or None
    kind = params.read_rel_type(query.get("relType"))
    count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
    view = state.view()
    if sku is not None:
        chosen = view.pairings_by_sku.get(sku, [])
        if kind is not None:
            chosen = [i for i in chosen if view.pairing_types[i] == kind]
        bodies = [view.pairing_bodies[i] for i in chosen]
    elif kind is not None:
        bodies = [view.pairing_bodies[i] for i in view.pairings_by_type.get(kind, [])]
    else:
        bodies = view.pairing_bodies
    return _page(state, bodies, page, count, partial(envelopes.nested_list, "pairings"))


def one_pairing(state: SandboxState, query: QueryParams, raw_id: str) -> bytes:
    """``/pairings/{relationship_id}``."""
    wanted = params.read_relationship_id(raw_id)
    body = state.view().pairing_by_id.get(wanted)
    if body is None:
        raise record_not_found("pairing", wanted)
    return envelopes.product_lookup(body)


# ---- warehouse --------------------------------------------------------------------------


def digital_assets(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Warehouse assets by (updatedAt, assetId); ``updatedAfter`` is strictly later."""
    page, count = params.read_page(query.get("page")), params.read_count(query.get("count"))
    after = params.read_datetime("updatedAfter", query.get("updatedAfter"))
    normalised = None if after is None else format_datetime(after)
    start, end = params.page_bounds(_listed_page(state, page), count)
    with state.lock:
        table = state.assets
        first = 0 if normalised is None else table.first_updated_after(normalised)
        total = len(table.keys) - first
        bodies = table.bodies[first + start : first + min(end, total)] if start < total else []
    if state.faults.mixed_timestamps:
        bodies = [styled_record(b, "assetId", ("createdAt", "updatedAt")) for b in bodies]
    pagination = _pagination(state, page, count, total)
    return envelopes.data_warehouse_list(bodies, pagination, {"updatedAfter": normalised})


def submittal_data(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Submittal of an (idu, odu) combination; either may be absent, not both."""
    idu, odu = query.get("idu") or None, query.get("odu") or None
    if idu is None and odu is None:
        raise lookup_params_missing(("idu", "odu"))
    body = state.submittals.get((idu, odu))
    if body is None:
        raise lookup_not_found("submittal data")
    return envelopes.product_lookup(body)


# ---- crm --------------------------------------------------------------------------------


def leads(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Leads by (CreatedDate, Id), after ``createdAfter`` and after the cursor (which the
    ``loop_cursor`` switch ignores: the list answers its first page again)."""
    keep = read_fields(query.get("fields"))
    after = params.read_datetime("createdAfter", query.get("createdAfter"))
    count = params.read_count(query.get("count"))
    cursor_date, cursor_id = query.get("cursorCreatedDate"), query.get("cursorId")
    if (cursor_date is None) != (cursor_id is None):
        raise cursor_incomplete("cursorCreatedDate", "cursorId")
    cursor_at = params.read_datetime("cursorCreatedDate", cursor_date)
    short_ids = state.faults.lead_detail_ids == "case_safe"
    if short_ids and cursor_id is not None and len(cursor_id) == SHORT_LENGTH:
        cursor_id += LATEST  # after every id of which it is the short form
    with state.lock:
        listing = state.leads
        first = 0 if after is None else listing.first_created_after(format_datetime(after))
        if cursor_at is not None and cursor_id is not None and not state.faults.loop_cursor:
            first = max(first, listing.first_after((format_datetime(cursor_at), cursor_id)))
        bodies = listing.bodies[first : first + count]
    if state.faults.mixed_timestamps:
        bodies = [styled_record(body, "Id", ("CreatedDate",)) for body in bodies]
    if short_ids:
        bodies = [with_short_id(body) for body in bodies]
    if keep is not None:
        bodies = [dumps({k: v for k, v in loads(body).items() if k in keep}) for body in bodies]
    return envelopes.data_list(bodies)


def lead_detail(state: SandboxState, query: QueryParams, lead_id: str) -> bytes:
    """One lead's detail object, without an envelope."""
    id_form = state.faults.lead_detail_ids
    with state.lock:
        known = full_id(state.leads, lead_id) if id_form == "case_safe" else lead_id
        found = None if known is None else state.lead(known)
    if found is None:
        raise record_not_found("lead", lead_id)
    if id_form == "omit_id":
        return dumps({k: v for k, v in found[1].items() if k != "id"})
    return dumps(found[1])


# ---- internal ---------------------------------------------------------------------------


def contractors(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Contractors with reviews, as a JSON text in ``data``."""
    return state.contractors_body


def indoor_models(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Indoor models (no auth); 429 beyond ``indoor_models_per_second`` calls in a second."""
    now = time.monotonic()
    calls = state.indoor_model_calls
    while calls and now - calls[0] >= 1.0:
        calls.popleft()
    if len(calls) >= state.indoor_models_per_second:
        raise rate_limited(max(1, math.ceil(1.0 - (now - calls[0]))))
    calls.append(now)
    return state.view().indoor_models


def manuals(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Objects under ``manuals/`` in the configured bucket (none without one)."""
    return list_manuals(state.s3_endpoint_url, state.s3_bucket)


def pim_image_sync(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """Start an image sync job; 429 while the last one is younger than the cooldown."""
    with state.lock:
        now = time.monotonic()
        if state.last_pim_start is not None:
            remaining = state.pim_cooldown_s - (now - state.last_pim_start)
            if remaining > 0:
                raise rate_limited(max(1, math.ceil(remaining)), "An image sync is running")
        state.last_pim_start = now
        state.pim_jobs += 1
        job = uuid.UUID(
            int=random.Random(f"pim:{state.seed}:{state.pim_jobs}").getrandbits(128), version=4
        )
    body = {
        "success": True,
        "jobId": str(job),
        "status": "started",
        "startedAt": format_datetime(datetime.now(UTC)),
    }
    return dumps(body)


# ---- routing ----------------------------------------------------------------------------

EXACT: dict[str, Handler] = {
    paths.PRODUCTS_LIST: products,
    PAIRINGS.path: pairings,
    paths.DATA_WAREHOUSE_DIGITAL_ASSETS: digital_assets,
    SUBMITTALS.path: submittal_data,
    paths.LEADS: leads,
    CONTRACTORS.path: contractors,
    INDOOR_MODELS.path: indoor_models,
    MANUALS.path: manuals,
    paths.PIM_IMAGE_SYNC: pim_image_sync,
    **{paths.unit_path(slug): unit_list(slug) for slug in paths.UNIT_SLUGS},
}
# Lookups: the rest of the (already percent-decoded) path is the key, slashes and all, so a
# SKU with an encoded "/" misses in the family's style instead of falling to "no such path".
PREFIXED: tuple[tuple[str, Handler], ...] = (
    *((paths.unit_path(slug) + "/", unit_lookup(slug)) for slug in paths.UNIT_SLUGS),
    (paths.UNITS_RESOLVER + "/", resolve_unit),
    (PAIRINGS.path + "/", one_pairing),
    (paths.LEADS + "/", lead_detail),
)
BLOCKING = frozenset({manuals})  # run in a worker thread: they wait on the network


def route(path: str) -> tuple[Handler, str] | None:
    """The handler of a path and the path's key part (empty for lists)."""
    handler = EXACT.get(path)
    if handler is not None:
        return handler, ""
    for prefix, lookup in PREFIXED:
        if path.startswith(prefix):
            return lookup, path[len(prefix) :]
    return None


def error_answer(error: ApiError, path: str) -> Answer:
    """An error in the style of the path's family."""
    return Answer.of_error(render(error, paths.family_of(path), path))


def authorised(scope: Scope, api_key: str) -> bool:
    """Whether the request carries ``Authorization: Bearer <api_key>``."""
    scheme, _, token = (header(scope, b"authorization") or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), api_key)


class SandboxApp:
    """The emulated service, plus its admin API (``/_sandbox/``) and media (``/media/``)."""

    def __init__(self, state: SandboxState) -> None:
        from sandbox.admin import AdminApi

        self.state = state
        self.admin = AdminApi(state)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.startswith(ADMIN_PREFIX):
            await self.admin(scope, receive, send)
        elif path.startswith(ODD_MEDIA_PREFIX):
            await serve_odd_media(self.state, path, send)
        elif path.startswith(MEDIA_PREFIX):
            await send_answer(send, self.media(path))
        else:
            await send_answer(send, await self.answer(scope))

    async def answer(self, scope: Scope) -> Answer:
        """The answer to one service request; never raises."""
        path = scope["path"]
        try:
            if scope["method"] not in ("GET", "HEAD"):
                raise ApiError(
                    ErrorCode.METHOD_NOT_ALLOWED,
                    "Only GET is supported",
                    headers={"Allow": "GET, HEAD"},
                )
            if path not in OPEN_PATHS and not authorised(scope, self.state.api_key):
                raise unauthorized()
            found = route(path)
            if found is None:
                raise no_such_path(path)
            handler, key = found
            query = QueryParams(scope["query_string"])
            if handler in BLOCKING:
                body = await asyncio.to_thread(handler, self.state, query, key)
            else:
                body = handler(self.state, query, key)
            return Answer(200, body)
        except ApiError as error:
            return error_answer(error, path)
        except Exception:
            log.exception("sandbox: unexpected error answering %s", path)
            return error_answer(ApiError(ErrorCode.INTERNAL, "Internal error"), path)

    def media(self, path: str) -> Answer:
        """``/media/images/<sku>/<n>.png``: deterministic PNG bytes of a product's image."""
        sku, _, name = path[len(MEDIA_PREFIX) :].rpartition("/")
        number = name.removesuffix(".png")
        known = sku in self.state.view().resolver
        if not (known and name.endswith(".png") and number.isdigit() and len(number) < 4):
            return Answer(404, b'{"error":"no such image"}')
        return Answer(200, image_png(sku, int(number)), "image/png")


def create_app(state: SandboxState) -> SandboxApp:
    """The sandbox as an ASGI app (``sandbox.faults`` layers misbehaviour over it)."""
    return SandboxApp(state)
