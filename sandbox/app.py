"""The sandbox upstream's answers: every path of the spec, exactly per the wire contract."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ductwork.contract import envelopes, params, paths
from ductwork.contract.encoding import dumps, format_datetime, loads
from ductwork.contract.errors import (
    JSON,
    ApiError,
    cursor_incomplete,
    lead_not_found,
    no_such_path,
    pairing_not_found,
    product_not_found,
    rate_limited,
    render,
    submittal_not_found,
    submittal_params_missing,
    unauthorized,
    unit_not_found,
    unknown_category,
)
from ductwork.contract.leads import read_fields
from ductwork.contract.manuals import MANUALS_PREFIX, manual_item, object_url
from sandbox.dataset import image_bytes
from sandbox.state import SandboxState

Handler = Callable[[Request, SandboxState], Response]
OPEN_PATHS = (paths.INDOOR_MODELS, "/media/")


def _json(body: bytes, status: int = 200) -> Response:
    return Response(content=body, status_code=status, media_type=JSON)


def _page(bodies: list[bytes], page: int, count: int, envelope: Callable) -> bytes:
    start, end = params.page_bounds(page, count)
    return envelope(bodies[start:end], params.pagination(page, count, len(bodies)))


def products(request: Request, state: SandboxState) -> Response:
    query = request.query_params
    category = query.get("category")
    if category is not None and category not in paths.UNIT_SLUGS:
        raise unknown_category(paths.UNIT_SLUGS)
    count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
    items = state.catalog["items"]
    bodies = [body for _, slug, body in items if category is None or slug == category]
    return _json(_page(bodies, page, count, envelopes.product_list))


def unit_list(slug: str) -> Handler:
    def handler(request: Request, state: SandboxState) -> Response:
        query = request.query_params
        names = ("series.name", "family.name", "brand")
        wanted = [params.read_filter(query.get(name)) for name in names]
        count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
        bodies = [
            body
            for _, filters, body in state.catalog["typed"][slug]
            if all(w is None or w == f for w, f in zip(wanted, filters, strict=True))
        ]
        return _json(_page(bodies, page, count, envelopes.product_list))

    return handler


def unit_lookup(slug: str) -> Handler:
    def handler(request: Request, state: SandboxState) -> Response:
        sku = request.path_params["sku"]
        body = state.catalog["by_sku"].get((slug, sku))
        if body is None:
            raise unit_not_found(slug, sku)
        return _json(envelopes.product_lookup(body))

    return handler


def resolve_unit(request: Request, state: SandboxState) -> Response:
    sku = request.path_params["sku"]
    body = state.catalog["resolver"].get(sku)
    if body is None:
        raise product_not_found(sku)
    return _json(envelopes.product_lookup(body))


def pairings(request: Request, state: SandboxState) -> Response:
    query = request.query_params
    sku = query.get("sku")
    kind = params.read_rel_type(query.get("relType"))
    count, page = params.read_count(query.get("count")), params.read_page(query.get("page"))
    bodies = [
        body
        for pairing, body in state.catalog["pairings"]
        if (kind is None or pairing["relType"] == kind)
        and (sku is None or any(p["sku"] == sku for p in pairing["products"]))
    ]
    return _json(_page(bodies, page, count, envelopes.pairing_list))


def one_pairing(request: Request, state: SandboxState) -> Response:
    wanted = params.read_relationship_id(request.path_params["relationship_id"])
    body = state.catalog["pairing_by_id"].get(wanted)
    if body is None:
        raise pairing_not_found(wanted)
    return _json(envelopes.product_lookup(body))


def digital_assets(request: Request, state: SandboxState) -> Response:
    query = request.query_params
    page, count = params.read_page(query.get("page")), params.read_count(query.get("count"))
    after = params.read_datetime("updatedAfter", query.get("updatedAfter"))
    with state.lock:
        first = 0
        normalised = None
        if after is not None:
            normalised = format_datetime(after)
            first = state.assets.first_after((normalised, "\U0010ffff"))
        start, end = params.page_bounds(page, count)
        total = len(state.assets.keys) - first
        bodies = state.assets.bodies[first + start : first + min(end, total)]
    pagination = params.pagination(page, count, total)
    return _json(envelopes.warehouse_list(bodies, pagination, {"updatedAfter": normalised}))


def submittal_data(request: Request, state: SandboxState) -> Response:
    query = request.query_params
    idu, odu = query.get("idu") or None, query.get("odu") or None
    if idu is None and odu is None:
        raise submittal_params_missing()
    body = state.submittals.get((idu, odu))
    if body is None:
        raise submittal_not_found()
    return _json(envelopes.product_lookup(body))


def leads(request: Request, state: SandboxState) -> Response:
    query = request.query_params
    keep = read_fields(query.get("fields"))
    after = params.read_datetime("createdAfter", query.get("createdAfter"))
    count = params.read_count(query.get("count"))
    cursor_date, cursor_id = query.get("cursorCreatedDate"), query.get("cursorId")
    if (cursor_date is None) != (cursor_id is None):
        raise cursor_incomplete()
    cursor_at = params.read_datetime("cursorCreatedDate", cursor_date)
    with state.lock:
        first = 0
        if after is not None:
            first = state.leads.first_after((format_datetime(after), "\U0010ffff"))
        if cursor_at is not None and cursor_id is not None:
            first = max(first, state.leads.first_after((format_datetime(cursor_at), cursor_id)))
        bodies = state.leads.bodies[first : first + count]
    if keep is not None:
        bodies = [dumps({k: v for k, v in loads(b).items() if k in keep}) for b in bodies]
    return _json(envelopes.data_list(bodies))


def lead_detail(request: Request, state: SandboxState) -> Response:
    ident = request.path_params["lead_id"]
    detail = state.lead_details.get(ident)
    if detail is None:
        raise lead_not_found(ident)
    return _json(dumps(detail))


def contractors(request: Request, state: SandboxState) -> Response:
    return _json(state.contractors_body)


def indoor_models(request: Request, state: SandboxState) -> Response:
    now = time.monotonic()
    calls = state.indoor_model_calls
    while calls and now - calls[0] >= 1.0:
        calls.popleft()
    if len(calls) >= state.indoor_models_per_second:
        raise rate_limited(max(1, math.ceil(1.0 - (now - calls[0]))))
    calls.append(now)
    models = [
        {"model": u["sku"], "sku": u["sku"], "series": u["series"]["name"],
         "family": u["family"]["name"],
         "capacityBtuh": (u.get("performance") or {}).get("coolingCapacityBtuh")}
        for u in sorted(state.units["indoor-units"], key=lambda unit: unit["sku"])
    ]  # fmt: skip
    return _json(dumps({"success": True, "data": models}))


def manuals(request: Request, state: SandboxState) -> Response:
    items: list[dict[str, Any]] = []
    if state.s3_endpoint_url and state.s3_bucket:
        import boto3

        s3 = boto3.client("s3", endpoint_url=state.s3_endpoint_url, region_name="us-east-1")
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=state.s3_bucket, Prefix=MANUALS_PREFIX
        )
        for page in pages:
            for obj in page.get("Contents") or []:
                head = s3.head_object(Bucket=state.s3_bucket, Key=obj["Key"])
                url = object_url(state.s3_endpoint_url, state.s3_bucket, obj["Key"])
                items.append(manual_item(obj["Key"], url, obj["Size"], obj["LastModified"],
                                         obj["ETag"], head.get("ContentType")))  # fmt: skip
    return _json(dumps({"success": True, "data": items}))


def pim_image_sync(request: Request, state: SandboxState) -> Response:
    with state.lock:
        now = time.monotonic()
        if state.last_pim_start is not None:
            remaining = state.pim_cooldown_s - (now - state.last_pim_start)
            if remaining > 0:
                raise rate_limited(max(1, math.ceil(remaining)), "An image sync is running")
        state.last_pim_start = now
    body = {"success": True, "jobId": str(uuid.uuid4()), "status": "started",
            "startedAt": format_datetime(datetime.now(UTC))}  # fmt: skip
    return _json(dumps(body))


def media(request: Request, state: SandboxState) -> Response:
    sku, number = request.path_params["sku"], request.path_params["name"].split(".")[0]
    return Response(content=image_bytes(sku, number), media_type="image/png")


def build_routes(state: SandboxState, admin: list[Route]) -> list[Route]:
    """Every route of the emulated service, wrapped with auth and family-style errors."""
    p = paths

    def route(path: str, handler: Handler) -> Route:
        return Route(path, _guarded(handler, state), methods=["GET"])

    routes = [
        route(p.PRODUCTS_LIST, products),
        route(f"{p.UNITS_RESOLVER}/{{sku:path}}", resolve_unit),
        route(p.PAIRINGS_LIST, pairings),
        route(f"{p.PAIRINGS_LIST}/{{relationship_id:path}}", one_pairing),
        route(p.WAREHOUSE_DIGITAL_ASSETS, digital_assets),
        route(p.SUBMITTAL_DATA, submittal_data),
        route(p.LEADS, leads),
        route(f"{p.LEADS}/{{lead_id:path}}", lead_detail),
        route(p.CONTRACTORS, contractors),
        route(p.INDOOR_MODELS, indoor_models),
        route(p.INTERNAL_DIGITAL_ASSETS, manuals),
        route(p.PIM_IMAGE_SYNC, pim_image_sync),
        route("/media/images/{sku}/{name}", media),
    ]
    for slug in p.UNIT_SLUGS:
        routes.append(route(p.unit_path(slug), unit_list(slug)))
        routes.append(route(f"{p.unit_path(slug)}/{{sku:path}}", unit_lookup(slug)))
    return [*admin, *routes, Route("/{rest:path}", _guarded(_unknown, state))]


def _unknown(request: Request, state: SandboxState) -> Response:
    raise no_such_path(request.url.path)


def error_response(error: ApiError, path: str) -> Response:
    """An error in the path family's style."""
    answer = render(error, paths.family_of(path), path)
    return Response(answer.body, answer.status, answer.headers, answer.media_type)


def _authorised(request: Request, state: SandboxState) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and token.strip() == state.api_key


def _guarded(handler: Handler, state: SandboxState) -> Callable:
    async def endpoint(request: Request) -> Response:
        path = request.url.path
        try:
            if not path.startswith(OPEN_PATHS) and not _authorised(request, state):
                raise unauthorized()
            return handler(request, state)
        except ApiError as error:
            return error_response(error, path)

    return endpoint


def create_app(state: SandboxState) -> Starlette:
    """The sandbox as an ASGI app (faults are layered on by ``sandbox.faults``)."""
    from sandbox.admin import admin_routes

    app = Starlette(routes=build_routes(state, admin_routes(state)))
    app.state.sandbox = state
    return app
