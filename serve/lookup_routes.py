"""The route of a lookup stream (``Serving.LOOKUP``): ``GET <path>`` with the query parameters
its requests were made with (its reader's ``params``), answering the record stored for that
combination in the lookup envelope, or the data warehouse's 404 (``data: {}``).

At least one parameter is required (an empty value counts as absent): none is a 400 naming
them.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ductwork.contract import envelopes
from ductwork.contract.errors import lookup_not_found, lookup_params_missing
from ductwork.streams.model import Stream
from serve import openapi_schemas as schemas
from serve.deps import SnapshotDep
from serve.openapi_docs import answer, record_of
from serve.responses import json_answer
from serve.route_signatures import query_parameter, with_signature

# What each lookup parameter of the spec holds, as the OpenAPI document says it.
PARAMETER_TEXTS = {"idu": "Indoor unit SRN.", "odu": "Outdoor unit SRN."}


def add_routes(stream: Stream, router: APIRouter) -> None:
    """Add the lookup route of ``stream`` to its family's ``router``."""
    names: tuple[str, ...] = stream.steps[0].reader.params  # type: ignore[attr-defined]
    what = stream.path.rpartition("/")[2].replace("-", " ")

    def look_up(request: Request, state: SnapshotDep, **given: str | None) -> Response:
        values = tuple(given[name] or None for name in names)
        if all(value is None for value in values):
            raise lookup_params_missing(names)
        record = state.small.lookups[stream.name].get(values)
        if record is None:
            raise lookup_not_found(what)
        modified = state.times.of(stream.name, "|".join(value or "" for value in values))
        return json_answer(request, state, envelopes.product_lookup(record), modified)

    asked = [query_parameter(name, description=PARAMETER_TEXTS.get(name)) for name in names]
    with_signature(look_up, *asked)
    listed = " and ".join(f"`{name}`" for name in names)
    router.add_api_route(
        stream.path.removeprefix(router.prefix),
        look_up,
        methods=["GET"],
        name=stream.path.rpartition("/")[2].replace("-", "_"),
        summary=f"One {what} record by {' and/or '.join(names)}",
        description=(
            f"At least one of {listed} is required (an empty value counts as absent): "
            "neither is a 400. Unknown combination: 404 with `data: {}`."
        ),
        responses=answer(schemas.lookup(record_of(stream))),
    )
