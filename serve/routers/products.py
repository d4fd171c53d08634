"""The product family: /products/v2.0 (catalog list, six unit types, resolver, pairings)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ductwork.contract import params, paths
from ductwork.contract.envelopes import product_lookup
from ductwork.contract.errors import (
    product_not_found,
    record_not_found,
    unit_not_found,
    unknown_category,
)
from ductwork.streams.products import CATALOG_ITEM_RECORD
from ductwork.streams.registry import PAIRINGS, PRODUCTS
from serve import openapi_schemas as schemas
from serve.catalog_index import UNIT_FILTERS
from serve.deps import SnapshotDep, require_key
from serve.openapi_docs import PRODUCT_ERRORS, answer, record_of
from serve.responses import json_answer

router = APIRouter(
    prefix=paths.PRODUCTS_PREFIX,
    tags=["products"],
    dependencies=[Depends(require_key)],
    responses=PRODUCT_ERRORS,
)

UNIT_LIST = answer(schemas.product_list(record_of(PRODUCTS)))
UNIT_LOOKUP = answer(schemas.lookup(record_of(PRODUCTS)))
CountQ = Annotated[str | None, Query(description="Page size, 1 to 1000 (default 100).")]
PageQ = Annotated[str | None, Query(description="Page number, from 1 (default 1).")]


@router.get(
    "/products",
    summary="All products (SKU, SRN, type, link), by SKU",
    responses=answer(schemas.product_list(record_of(PRODUCTS, CATALOG_ITEM_RECORD))),
)
async def list_products(
    request: Request,
    state: SnapshotDep,
    category: Annotated[str | None, Query(description="A route slug, e.g. indoor-units.")] = None,
    count: CountQ = None,
    page: PageQ = None,
) -> Response:
    if category is not None and category not in paths.UNIT_SLUGS:
        raise unknown_category(paths.UNIT_SLUGS)
    size, number = params.read_count(count), params.read_page(page)
    return json_answer(request, state, state.catalog.product_page(category, number, size))


def _add_unit_routes(slug: str) -> None:
    """The list and lookup routes of one unit type."""
    name = slug.replace("-", "_")

    async def list_units(
        request: Request,
        state: SnapshotDep,
        series_name: Annotated[str | None, Query(alias="series.name")] = None,
        family_name: Annotated[str | None, Query(alias="family.name")] = None,
        brand: Annotated[str | None, Query()] = None,
        count: CountQ = None,
        page: PageQ = None,
    ) -> Response:
        raw = dict(zip(UNIT_FILTERS, (series_name, family_name, brand), strict=True))
        wanted = {k: v for k, v in ((k, params.read_filter(r)) for k, r in raw.items()) if v}
        size, number = params.read_count(count), params.read_page(page)
        return json_answer(request, state, state.catalog.unit_page(slug, wanted, number, size))

    async def get_unit(request: Request, state: SnapshotDep, sku: str) -> Response:
        record = state.catalog.unit(slug, sku)
        if record is None:
            raise unit_not_found(slug, sku)
        modified = state.times.of(PRODUCTS.name, sku)
        return json_answer(request, state, product_lookup(record), modified)

    router.add_api_route(
        f"/{slug}", list_units, methods=["GET"], name=f"list_{name}",
        summary=f"{slug} records, by SKU; filters match exactly, ignoring case",
        responses=UNIT_LIST,
    )  # fmt: skip
    router.add_api_route(
        f"/{slug}/{{sku:path}}", get_unit, methods=["GET"], name=f"get_{name}",
        summary=f"One {slug} record by SKU (404 if unknown or of another type)",
        responses=UNIT_LOOKUP,
    )  # fmt: skip


for _slug in paths.UNIT_SLUGS:
    _add_unit_routes(_slug)


@router.get(
    "/units/{sku:path}",
    summary="Any unit record by SKU, whatever its type",
    responses=UNIT_LOOKUP,
)
async def resolve_unit(request: Request, state: SnapshotDep, sku: str) -> Response:
    record = state.catalog.resolver.get(sku)
    if record is None:
        raise product_not_found(sku)
    modified = state.times.of(PRODUCTS.name, sku)
    return json_answer(request, state, product_lookup(record), modified)


@router.get(
    "/pairings",
    summary="Pairings and relationships, by relationship id",
    responses=answer(schemas.nested_list("pairings", record_of(PAIRINGS))),
)
async def list_pairings(
    request: Request,
    state: SnapshotDep,
    sku: Annotated[str | None, Query(description="A SKU in position P1, P2 or P3.")] = None,
    rel_type: Annotated[str | None, Query(alias="relType")] = None,
    count: CountQ = None,
    page: PageQ = None,
) -> Response:
    kind = params.read_rel_type(rel_type)
    size, number = params.read_count(count), params.read_page(page)
    body = state.catalog.pairing_page(sku, kind, number, size)
    return json_answer(request, state, body)


@router.get(
    "/pairings/{relationship_id:path}",
    summary="One pairing by relationship id",
    responses=answer(schemas.lookup(record_of(PAIRINGS))),
)
async def get_pairing(request: Request, state: SnapshotDep, relationship_id: str) -> Response:
    wanted = params.read_relationship_id(relationship_id)
    record = state.catalog.pairing(wanted)
    if record is None:
        raise record_not_found("pairing", wanted)
    modified = state.times.of(PAIRINGS.name, str(wanted))
    return json_answer(request, state, product_lookup(record), modified)
