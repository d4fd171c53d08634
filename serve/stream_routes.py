"""The routes of every stream, made from the registry: each stream's routes by how it is
served (``Stream.serving``), added to its family's router.

One module per way of serving makes them; the catalog's lists and lookups, with their filters
and the resolver, are written out in ``serve.routers.products``.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter

from ductwork.contract.paths import Family
from ductwork.streams.model import Serving, Stream
from ductwork.streams.registry import STREAMS
from serve import cursor_list_routes, document_routes, lookup_routes, paged_list_routes

# How the routes of a stream served in each way are added to its family's router.
ROUTE_MAKERS: dict[Serving, Callable[[Stream, APIRouter], None]] = {
    Serving.PAGED_LIST: paged_list_routes.add_routes,
    Serving.CURSOR_LIST: cursor_list_routes.add_routes,
    Serving.LOOKUP: lookup_routes.add_routes,
    Serving.DOCUMENT: document_routes.add_routes,
}


def add_stream_routes(routers: dict[Family, APIRouter]) -> None:
    """Add every stream's routes (the catalog's excepted) to its family's router, in the
    registry's order."""
    for stream in STREAMS:
        make = ROUTE_MAKERS.get(stream.serving)
        if make is not None:
            make(stream, routers[stream.family])
