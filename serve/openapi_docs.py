"""The OpenAPI document, and the pages that show it.

What the generated document cannot infer is added here: each family's answers (handlers build
them from ready bytes), the contract's parameter types and bounds (handlers read parameters
raw, to apply the contract's own rules and messages), the rules OpenAPI cannot state, and the
bearer scheme. ``/openapi.json``, ``/docs`` and ``/redoc`` are served like ``/metrics``: to
anyone with ``DUCTWORK_SERVE_PUBLIC_DOCS``, otherwise to a key with the ``ops`` scope.

The two viewers' scripts and styles come from an installed package (``openapi-ui-bundles``)
and are served under ``/docs/assets/``, so the pages load nothing from elsewhere; their
Content-Security-Policy holds the browser to that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from openapi_ui_bundles import redoc as redoc_bundle
from openapi_ui_bundles import swagger_ui as swagger_bundle

from ductwork.contract import paths
from ductwork.contract.errors import JSON, PROBLEM_JSON, no_such_path
from ductwork.contract.leads import LEAD_LIST_FIELDS
from ductwork.contract.params import MAX_COUNT, MAX_INTEGER, REL_TYPES
from ductwork.streams.model import Stream
from ductwork.streams.registry import OPEN_PATHS, STREAMS
from ductwork.upstream.schema_drift import RecordShape
from serve import openapi_schemas as schemas
from serve.deps import require_ops

Schema = dict[str, Any]
BEARER = "bearerAuth"
OPENAPI_PATH = "/openapi.json"
ASSETS_PATH = "/docs/assets"

# The viewers' files by the name the pages use: (file in the installed package, media type).
_SWAGGER, _REDOC = swagger_bundle.static_path, redoc_bundle.static_path
_ASSETS: dict[str, tuple[Path, str]] = {
    "swagger-ui-bundle.js": (_SWAGGER / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (_SWAGGER / "swagger-ui.css", "text/css"),
    "favicon.png": (_SWAGGER / "favicon-32x32.png", "image/png"),
    "redoc.standalone.js": (_REDOC / "redoc.standalone.js", "text/javascript"),
}
# Scripts, styles, images and fetches from this origin only. Inline code stays allowed: Swagger
# UI's page starts it with an inline script and ReDoc styles itself inline.
DOCS_PAGE_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'"
)

_MEANINGS = {
    400: "A parameter is invalid (the offending one is named).",
    401: "Missing or unknown API key.",
    403: "The key lacks the scope this path needs.",
    404: "Nothing has that key, or no such path.",
    410: "History older than what the mirror keeps; `oldest` names the oldest instant kept.",
    429: "Too many requests; `Retry-After` says how many seconds to wait.",
    503: "No snapshot has been published yet (or the job queue cannot be reached).",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ["Bearer"]}}},
    429: {"Retry-After": {"required": True, "schema": {"type": "string", "pattern": "^[0-9]+$"}}},
}


def error_responses(
    schema: Schema,
    media_type: str = JSON,
    statuses: tuple[int, ...] = (400, 401, 403, 404, 429, 503),
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a family's error answers."""
    answers: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        answer: dict[str, Any] = {
            "description": _MEANINGS[status],
            "content": {media_type: {"schema": schema}},
        }
        if status in _HEADERS:
            answer["headers"] = _HEADERS[status]
        answers[status] = answer
    return answers


PRODUCT_ERRORS = error_responses(schemas.PRODUCT_ERROR)
DATA_WAREHOUSE_ERRORS = error_responses(schemas.DATA_WAREHOUSE_ERROR)
PROBLEM_ERRORS = error_responses(schemas.PROBLEM, PROBLEM_JSON)
OPS_ERRORS = error_responses(schemas.PROBLEM, PROBLEM_JSON, (401, 403, 429))
# The mirror's own surface: Problems, and a 410 for history no longer kept.
MIRROR_ERRORS = error_responses(schemas.PROBLEM, PROBLEM_JSON, (400, 401, 403, 404, 410, 429, 503))


def _whitespace_class() -> str:
    """The characters ``str.strip()`` removes, as a regular-expression class."""
    return "[" + "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x10000)) if c.isspace()) + "]"


def _fields_pattern() -> str:
    """What ``fields`` accepts: comma-separated known names, each possibly padded or empty."""
    space = _whitespace_class()
    piece = f"{space}*(?:(?:{'|'.join(LEAD_LIST_FIELDS)}){space}*)?"
    return f"^{piece}(?:,{piece})*$"


# The paths the spec declares without ``Authorization``.
_DATE_TIME: Schema = {"type": "string", "format": "date-time"}
_COUNT: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": 100}
PARAMETER_SCHEMAS: dict[str, Schema] = {
    "count": _COUNT,
    "page": {"type": "integer", "minimum": 1, "maximum": MAX_INTEGER, "default": 1},
    "category": {"type": "string", "enum": list(paths.UNIT_SLUGS)},
    "relType": {"type": "string", "enum": list(REL_TYPES)},
    "relationship_id": {"type": "integer", "minimum": -MAX_INTEGER, "maximum": MAX_INTEGER},
    "stream": {"type": "string", "enum": [stream.name for stream in STREAMS]},
    "limit": {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 1000},
    "wait": {"type": "integer", "minimum": 0, "maximum": 60, "default": 0},
    "updatedAfter": _DATE_TIME,
    "createdAfter": _DATE_TIME,
    "cursorCreatedDate": _DATE_TIME,
    "fields": {"type": "string", "pattern": _fields_pattern()},
}


def answer(schema: Schema, description: str = "The answer.") -> dict[int | str, Any]:
    """A route's ``responses`` entry for its 200 answer, whose body it builds from bytes (so
    FastAPI cannot infer the schema)."""
    return {200: {"description": description, "content": {JSON: {"schema": schema}}}}


def record_of(stream: Stream, shape: RecordShape | None = None) -> Schema:
    """The schema of a stream's record (or of another shape it serves, e.g. a list item)."""
    return schemas.record(shape or stream.shape, f"{stream.description} As received.")


def _needs_key(path: str, public_docs: bool) -> bool:
    if path == "/metrics":
        return not public_docs
    mirror_surface = path.startswith("/_ductwork/")
    return mirror_surface or (paths.family_of(path) is not None and path not in OPEN_PATHS)


PAST_PATH = "/_ductwork/v1/at/{instant}/{path}"


def _past_operation() -> Schema:
    """The past on the spec's paths, answered before routing (``serve.past``): documented here,
    since no route of its own answers it."""
    problems = {str(k): v for k, v in MIRROR_ERRORS.items()}
    return {
        "get": {
            "tags": ["mirror"],
            "summary": "Any spec GET path as the mirror served it at an instant",
            "description": (
                "`instant` is an RFC 3339 date-time (the snapshot current then) or a snapshot "
                "version; `path` is a spec path with its query. The answer is the one the "
                "mirror gave then: same status, body, paging, filters and errors, with "
                "`Memento-Datetime`, `X-Snapshot-Version` and `Cache-Control: private, "
                "immutable`. An instant after the newest snapshot answers as now; one before "
                "the history kept is a 410. The spec's paths take `Accept-Datetime` "
                "(an HTTP-date) to the same effect (RFC 7089), and so every answer of one varies "
                "by it (`Vary`) and links its TimeMap and itself as original and TimeGate "
                "(`Link`). A memento links them and itself, `/_ductwork/v1/at/{version}/<path>` "
                "with its `datetime`, named in `Content-Location` when asked for by "
                "`Accept-Datetime` or a date-time. Answers of the past carry no `X-Synced-At` "
                "and are never refused for staleness."
            ),
            "parameters": [
                {"name": "instant", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "path",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "A spec GET path, without /.",
                },
            ],
            "responses": {
                "200": {
                    "description": "The path's answer as it was then.",
                    "content": {JSON: {"schema": {"type": ["object", "array"]}}},
                },
                **problems,
            },
        }
    }


def build_document(app: FastAPI, public_docs: bool) -> Schema:
    """The app's OpenAPI document, completed with what the routes cannot say."""
    document = get_openapi(
        title=app.title, version=app.version, summary=app.summary, routes=app.routes
    )
    document["paths"][PAST_PATH] = _past_operation()
    for path, path_item in document["paths"].items():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for parameter in operation.get("parameters", []):
                known = PARAMETER_SCHEMAS.get(parameter["name"])
                if known is not None:
                    parameter["schema"] = known
            if path == "/readyz":
                responses["503"]["content"] = {JSON: {"schema": schemas.READY}}
            if _needs_key(path, public_docs):
                operation["security"] = [{BEARER: []}]
                if path == "/metrics":
                    responses.update({str(k): v for k, v in OPS_ERRORS.items()})
            else:
                operation["security"] = []
                for status in ("401", "403"):
                    responses.pop(status, None)
    components = document.setdefault("components", {})
    components.setdefault("schemas", {}).pop("HTTPValidationError", None)
    components["schemas"].pop("ValidationError", None)
    if not components["schemas"]:
        components.pop("schemas")
    components["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "A key from `ductwork keys create`, as `Authorization: Bearer KEY`.",
        }
    }
    return document


def install_openapi(app: FastAPI, public_docs: bool) -> None:
    """Build the document once, on first use, and serve it with its two viewers.

    The app must be created with FastAPI's own document and viewer routes turned off.
    """

    def openapi() -> Schema:
        if app.openapi_schema is None:
            app.openapi_schema = build_document(app, public_docs)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    guarded = [Depends(require_ops)]

    @app.get(OPENAPI_PATH, include_in_schema=False, dependencies=guarded)
    async def openapi_json(request: Request) -> Response:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=guarded)
    async def swagger_ui(request: Request) -> HTMLResponse:
        # No persistAuthorization: a key typed into "Authorize" is not kept in the browser.
        page = get_swagger_ui_html(
            openapi_url=OPENAPI_PATH,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        )
        page.headers["Content-Security-Policy"] = DOCS_PAGE_POLICY
        return page

    @app.get("/redoc", include_in_schema=False, dependencies=guarded)
    async def redoc(request: Request) -> HTMLResponse:
        page = get_redoc_html(
            openapi_url=OPENAPI_PATH,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = DOCS_PAGE_POLICY
        return page

    @app.get(ASSETS_PATH + "/{name}", include_in_schema=False, dependencies=guarded)
    async def docs_asset(request: Request, name: str) -> Response:
        found = _ASSETS.get(name)
        if found is None:
            raise no_such_path(request.url.path)
        path, media_type = found
        return FileResponse(path, media_type=media_type)
