"""The signatures of handlers made per stream (``serve.stream_routes``).

FastAPI reads a route's parameters from its handler's signature. A handler made from the
registry takes the request, the snapshot and its query values by keyword (``**given``), and
its signature names the parameters its stream's declarations give, with the names on the wire.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Query, Request, Response

from serve.deps import SnapshotDep

Handler = TypeVar("Handler", bound=Callable[..., Any])
_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
_FIRST = (
    inspect.Parameter("request", _POSITIONAL, annotation=Request),
    inspect.Parameter("state", _POSITIONAL, annotation=SnapshotDep),
)


def query_parameter(
    name: str, python_name: str | None = None, description: str | None = None
) -> inspect.Parameter:
    """An optional query parameter, ``name`` on the wire and ``python_name`` (default: the
    same) among the handler's keywords, read raw (the contract's rules read its value)."""
    alias = name if python_name not in (None, name) else None
    found = Query(alias=alias, description=description)
    return inspect.Parameter(
        python_name or name, _KEYWORD, default=None, annotation=Annotated[str | None, found]
    )


def path_parameter(name: str) -> inspect.Parameter:
    """A parameter of the path, as text."""
    return inspect.Parameter(name, _KEYWORD, annotation=str)


def with_signature(handler: Handler, *parameters: inspect.Parameter) -> Handler:
    """``handler``, its signature the request, the snapshot and ``parameters``."""
    signature = inspect.Signature([*_FIRST, *parameters], return_annotation=Response)
    handler.__signature__ = signature  # type: ignore[attr-defined]
    return handler
