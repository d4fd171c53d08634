"""What the generated OpenAPI document cannot infer: each family's error answers and the
contract's parameter types (handlers read parameters raw, to apply the contract's own rules
and messages)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ductwork.contract.errors import JSON, PROBLEM_JSON
from ductwork.contract.leads import LEAD_LIST_FIELDS
from ductwork.contract.params import MAX_COUNT, REL_TYPES
from ductwork.contract.paths import UNIT_SLUGS

_ERROR_OBJECT = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string", "enum": [
            "NOT_FOUND", "INVALID_PARAMETER", "UNAUTHORIZED", "FORBIDDEN", "RATE_LIMITED",
            "INTERNAL", "METHOD_NOT_ALLOWED", "UNAVAILABLE",
        ]},
        "message": {"type": "string"},
        "field": {"type": "string"},
    },
}  # fmt: skip
PRODUCT_ERROR = {
    "type": "object",
    "required": ["success", "data", "errors"],
    "properties": {
        "success": {"type": "boolean", "enum": [False]},
        "data": {"type": "null"},
        "errors": {"type": "array", "items": _ERROR_OBJECT},
    },
}
WAREHOUSE_ERROR = {
    "type": "object",
    "required": ["success", "data", "errors"],
    "properties": {
        "success": {"type": "boolean", "enum": [False]},
        "data": {"type": ["object", "null"]},
        "errors": {"type": "array", "items": {"type": "string"}},
    },
}
PROBLEM = {
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "instance": {"type": "string"},
    },
}
_MEANINGS = {
    400: "A parameter is invalid (the offending one is named).",
    401: "Missing or unknown API key (with `WWW-Authenticate: Bearer`).",
    403: "The key lacks this family's scope.",
    404: "Nothing has that key, or no such path.",
    429: "Too many requests; `Retry-After` says how long to wait.",
    503: "No snapshot has been published yet.",
}


def error_responses(
    schema: dict[str, Any],
    media_type: str = JSON,
    statuses: tuple[int, ...] = (400, 401, 403, 404, 429, 503),
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a family's error answers."""
    return {
        status: {"description": _MEANINGS[status], "content": {media_type: {"schema": schema}}}
        for status in statuses
    }


PRODUCT_ERRORS = error_responses(PRODUCT_ERROR)
WAREHOUSE_ERRORS = error_responses(WAREHOUSE_ERROR)
PROBLEM_ERRORS = error_responses(PROBLEM, PROBLEM_JSON)


_DATE_TIME = {"type": "string", "format": "date-time"}
_FIELD = "|".join(LEAD_LIST_FIELDS)
PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {
    "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": 100},
    "page": {"type": "integer", "minimum": 1, "default": 1},
    "category": {"type": "string", "enum": list(UNIT_SLUGS)},
    "relType": {"type": "string", "enum": list(REL_TYPES)},
    "relationship_id": {"type": "integer"},
    "updatedAfter": _DATE_TIME,
    "createdAfter": _DATE_TIME,
    "cursorCreatedDate": _DATE_TIME,
    "fields": {"type": "string", "pattern": f"^({_FIELD})(,({_FIELD}))*$"},
}


def install_openapi(app: FastAPI) -> None:
    """Generate the document once, with the contract's parameter types and without the 422
    answers FastAPI assumes (parameters never fail that way here)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            for path_item in document["paths"].values():
                for operation in path_item.values():
                    operation.get("responses", {}).pop("422", None)
                    for parameter in operation.get("parameters", []):
                        known = PARAMETER_SCHEMAS.get(parameter["name"])
                        if known is not None:
                            parameter["schema"] = known
            schemas = document.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
