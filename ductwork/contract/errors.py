"""Error bodies in each path family's own style, per the wire contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ductwork.contract.encoding import dumps
from ductwork.contract.paths import Family

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"


class ErrorCode(StrEnum):
    """The ErrorObject codes of the product family; each maps to a Problem slug."""

    NOT_FOUND = "NOT_FOUND"
    INVALID_PARAMETER = "INVALID_PARAMETER"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    RATE_LIMITED = "RATE_LIMITED"
    INTERNAL = "INTERNAL"
    # Beyond the contract's list, for answers only the read API gives.
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    UNAVAILABLE = "UNAVAILABLE"
    HISTORY_UNAVAILABLE = "HISTORY_UNAVAILABLE"  # the mirror's own surface: history not kept
    URI_TOO_LONG = "URI_TOO_LONG"
    HEADERS_TOO_LARGE = "HEADERS_TOO_LARGE"

    @property
    def slug(self) -> str:
        return self.value.lower().replace("_", "-")

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES = {
    ErrorCode.NOT_FOUND: "Not Found",
    ErrorCode.INVALID_PARAMETER: "Invalid Parameter",
    ErrorCode.UNAUTHORIZED: "Unauthorized",
    ErrorCode.FORBIDDEN: "Forbidden",
    ErrorCode.RATE_LIMITED: "Too Many Requests",
    ErrorCode.INTERNAL: "Internal Server Error",
    ErrorCode.METHOD_NOT_ALLOWED: "Method Not Allowed",
    ErrorCode.UNAVAILABLE: "Service Unavailable",
    ErrorCode.URI_TOO_LONG: "URI Too Long",
    ErrorCode.HEADERS_TOO_LARGE: "Request Header Fields Too Large",
    ErrorCode.HISTORY_UNAVAILABLE: "History Unavailable",
}

STATUS_OF = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_PARAMETER: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.HISTORY_UNAVAILABLE: 410,
    ErrorCode.URI_TOO_LONG: 414,
    ErrorCode.HEADERS_TOO_LARGE: 431,
}


@dataclass
class ApiError(Exception):
    """A request that cannot be answered; rendered in the style of the path's family."""

    code: ErrorCode
    message: str
    param: str | None = None
    retry_after: int | None = None
    # A data warehouse lookup answers a miss with ``data: {}`` instead of ``null``.
    empty_data: object = None
    headers: dict[str, str] = field(default_factory=dict)
    # Members a Problem carries beyond its own (RFC 9457 extension members), e.g. ``oldest``.
    problem_members: dict[str, object] = field(default_factory=dict)

    @property
    def status(self) -> int:
        return STATUS_OF[self.code]


@dataclass(frozen=True)
class ErrorAnswer:
    """A rendered error: status, headers and body bytes, independent of any web framework."""

    status: int
    headers: dict[str, str]
    body: bytes
    media_type: str


def invalid(param: str, message: str) -> ApiError:
    """A 400 for one offending query or path parameter."""
    return ApiError(ErrorCode.INVALID_PARAMETER, message, param=param)


def not_found(message: str, empty_data: object = None) -> ApiError:
    """A 404."""
    return ApiError(ErrorCode.NOT_FOUND, message, empty_data=empty_data)


def unauthorized(message: str = "Missing or invalid API key") -> ApiError:
    """A 401; answered with ``WWW-Authenticate: Bearer``."""
    return ApiError(ErrorCode.UNAUTHORIZED, message)


def rate_limited(retry_after: int, message: str = "Too many requests") -> ApiError:
    """A 429 with its mandatory ``Retry-After``."""
    return ApiError(ErrorCode.RATE_LIMITED, message, retry_after=retry_after)


def render(error: ApiError, family: Family | None, path: str) -> ErrorAnswer:
    """Render an error in its family's style: product or data warehouse envelope, or Problem."""
    headers = dict(error.headers)
    if error.code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    if family is Family.PRODUCTS:
        item: dict[str, str] = {"code": error.code.value, "message": error.message}
        if error.param is not None:
            item["field"] = error.param
        body = {"success": False, "data": None, "errors": [item]}
        return ErrorAnswer(error.status, headers, dumps(body), JSON)
    if family is Family.DATA_WAREHOUSE:
        body = {"success": False, "data": error.empty_data, "errors": [error.message]}
        return ErrorAnswer(error.status, headers, dumps(body), JSON)
    problem = {
        "type": f"/problems/{error.code.slug}",
        "title": error.code.title,
        "status": error.status,
        "instance": path,
        **error.problem_members,
    }
    return ErrorAnswer(error.status, headers, dumps(problem), PROBLEM_JSON)


# The errors both the sandbox and the read API give, worded once.
def unknown_category(slugs: tuple[str, ...]) -> ApiError:
    """``category`` is not a route slug."""
    return invalid("category", "category must be one of " + ", ".join(slugs))


def unit_not_found(slug: str, sku: str) -> ApiError:
    """A typed lookup missed (unknown SKU, or a SKU of another type)."""
    return not_found(f"No {slug} product with SKU {sku[:80]!r}")


def product_not_found(sku: str) -> ApiError:
    """The units resolver missed."""
    return not_found(f"No product with SKU {sku[:80]!r}")


def record_not_found(what: str, key: str | int) -> ApiError:
    """No ``what`` (a record's name in a message, e.g. ``lead``) has that key."""
    shown = key if isinstance(key, int) else repr(key[:80])
    return not_found(f"No {what} {shown}")


def lookup_params_missing(names: tuple[str, ...]) -> ApiError:
    """None of a lookup's query parameters was given."""
    return invalid(names[0], f"{' or '.join(names)} is required")


def lookup_not_found(what: str) -> ApiError:
    """Nothing for that combination of query values (data warehouse style: ``data: {}``)."""
    return not_found(f"No {what} for this combination", empty_data={})


def cursor_incomplete(created: str, record_id: str) -> ApiError:
    """Only one of a cursor's two parameters (``created`` and ``record_id``) was given."""
    return invalid(record_id, f"{created} and {record_id} must be given together")


def no_such_path(path: str) -> ApiError:
    """Nothing answers at this path."""
    return not_found(f"No such path: {path[:200]}")


def history_unavailable(oldest: str) -> ApiError:
    """A 410 of the mirror's own surface: what was asked for is older than the history kept,
    whose oldest instant the Problem names (``oldest``)."""
    return ApiError(
        ErrorCode.HISTORY_UNAVAILABLE,
        f"History before {oldest} is no longer kept",
        problem_members={"detail": f"History before {oldest} is no longer kept", "oldest": oldest},
    )
