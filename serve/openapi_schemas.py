"""JSON Schemas of the read API's answers, for its OpenAPI document.

Envelopes, pagination and errors are built by the API itself, so their schemas are exact.
Records are served as the upstream sent them (unknown members kept, missing optional members
left out), so a record's schema requires only the key the sync cannot store it without and
describes the other members without constraining them.
"""

from __future__ import annotations

from typing import Any

from ductwork.contract.errors import ErrorCode
from ductwork.contract.params import MAX_COUNT, MAX_INTEGER
from ductwork.upstream.schema_drift import RecordShape

Schema = dict[str, Any]

_TRUE: Schema = {"type": "boolean", "const": True}
_FALSE: Schema = {"type": "boolean", "const": False}
_NO_ERRORS: Schema = {"type": "array", "maxItems": 0}


_JSON_TYPES = {
    str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
    list: "array", type(None): "null",
}  # fmt: skip


def record(shape: RecordShape, description: str, key: str | None = None) -> Schema:
    """A record as received: an object whose members the shape names (described, not
    constrained), with ``key`` present when given."""
    properties = {}
    for member, kinds in shape.typed_members:
        note = shape.notes.get(member)
        types = " or ".join(sorted(_JSON_TYPES.get(kind, kind.__name__) for kind in kinds))
        properties[member] = {"description": note or f"As received ({types})."}
    schema: Schema = {"type": "object", "description": description, "properties": properties}
    if key is not None:
        schema["required"] = [key]
    return schema


PAGINATION: Schema = {
    "type": "object",
    "required": ["page", "count", "totalItems", "totalPages"],
    "properties": {
        "page": {"type": "integer", "minimum": 1, "maximum": MAX_INTEGER},
        "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
        "totalItems": {"type": "integer", "minimum": 0},
        "totalPages": {"type": "integer", "minimum": 0},
    },
}


def product_list(item: Schema) -> Schema:
    """A product-family list page."""
    return {
        "type": "object",
        "required": ["success", "data", "pagination", "errors"],
        "properties": {
            "success": _TRUE,
            "data": {"type": "array", "items": item},
            "pagination": PAGINATION,
            "errors": _NO_ERRORS,
        },
    }


def lookup(data: Schema) -> Schema:
    """``{success, data, errors}`` around one record (or a list, for the leads)."""
    return {
        "type": "object",
        "required": ["success", "data", "errors"],
        "properties": {"success": _TRUE, "data": data, "errors": _NO_ERRORS},
    }


def nested_list(member: str, item: Schema) -> Schema:
    """An APIResponseV3 list: the records in ``data``'s ``member``, the pagination beside."""
    return lookup(
        {
            "type": "object",
            "required": [member, "pagination"],
            "properties": {member: {"type": "array", "items": item}, "pagination": PAGINATION},
        }
    )


def data_warehouse_list(item: Schema) -> Schema:
    """A data warehouse list page, with the filters it applied."""
    return {
        "type": "object",
        "required": ["success", "data", "errors", "pagination", "filters"],
        "properties": {
            "success": _TRUE,
            "data": {"type": "array", "items": item},
            "errors": _NO_ERRORS,
            "pagination": PAGINATION,
            "filters": {
                "type": "object",
                "required": ["updatedAfter"],
                "properties": {"updatedAfter": {"type": ["string", "null"]}},
            },
        },
    }


def document(item: Schema, data_as_text: bool) -> Schema:
    """A document stream's answer: ``{success, data: [record]}``, or, when the upstream sends
    its records as a JSON text, ``{success, message, data: text or null}``."""
    if data_as_text:
        return {
            "type": "object",
            "required": ["success", "data"],
            "properties": {
                "success": _TRUE,
                "message": {"type": "string"},
                "data": {
                    "type": ["string", "null"],
                    "description": "A JSON text of the records: " + item.get("description", ""),
                },
            },
        }
    return {
        "type": "object",
        "required": ["success", "data"],
        "properties": {"success": _TRUE, "data": {"type": "array", "items": item}},
    }


CHANGE: Schema = {
    "type": "object",
    "required": ["op", "key", "version", "changedAt", "record"],
    "properties": {
        "op": {"type": "string", "enum": ["upsert", "delete"]},
        "key": {"type": "string"},
        "version": {"type": "string", "description": "The snapshot that last changed it."},
        "changedAt": {"type": "string", "description": "When that snapshot was published."},
        "record": {
            "type": ["object", "null"],
            "description": "The record as the stream's single-record form serves it; null for "
            "a delete.",
        },
    },
}
CHANGES: Schema = {
    "type": "object",
    "required": ["stream", "since", "next", "hasMore", "snapshot", "changes"],
    "properties": {
        "stream": {"type": "string"},
        "since": {"type": ["string", "null"]},
        "next": {"type": "string", "description": "The token that continues the walk."},
        "hasMore": {"type": "boolean"},
        "snapshot": {"type": "string", "description": "The snapshot the walk is pinned to."},
        "changes": {"type": "array", "items": CHANGE},
    },
}
_MEMENTO: Schema = {
    "type": "object",
    "required": ["datetime", "version", "uri"],
    "properties": {
        "datetime": {"type": "string", "format": "date-time", "description": "Its publish time."},
        "version": {"type": "string", "description": "The snapshot that answers it."},
        "uri": {"type": "string", "description": "`/_ductwork/v1/at/{version}/<path>`."},
    },
}
TIMEMAP: Schema = {
    "type": "object",
    "required": ["original", "timegate", "timemap", "from", "until", "mementos"],
    "properties": {
        "original": {"type": "string", "description": "The spec path with its query."},
        "timegate": {"type": "string", "description": "The same: it takes `Accept-Datetime`."},
        "timemap": {"type": "string"},
        "from": {"type": "string", "format": "date-time"},
        "until": {"type": "string", "format": "date-time"},
        "mementos": {"type": "array", "items": _MEMENTO, "minItems": 1},
    },
}
_COUNTS: Schema = {
    "type": "object",
    "required": ["upsert", "delete"],
    "properties": {
        "upsert": {"type": "integer", "minimum": 0},
        "delete": {"type": "integer", "minimum": 0},
    },
}
PUBLISHES: Schema = {
    "type": "object",
    "required": ["snapshot", "publishes"],
    "properties": {
        "snapshot": {"type": "string", "description": "The snapshot whose history answered."},
        "publishes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["version", "publishedAt", "changes"],
                "properties": {
                    "version": {"type": "string"},
                    "publishedAt": {"type": "string", "format": "date-time"},
                    "changes": {
                        "type": ["object", "null"],
                        "additionalProperties": _COUNTS,
                        "description": "Per stream changed, of those the key may read; null "
                        "for the oldest publish kept.",
                    },
                },
            },
        },
    },
}
JOB_STARTED: Schema = {
    "type": "object",
    "required": ["success", "jobId", "status", "startedAt"],
    "properties": {
        "success": _TRUE,
        "jobId": {"type": "string"},
        "status": {"type": "string", "const": "started"},
        "startedAt": {"type": "string"},
    },
}
HEALTH: Schema = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}},
}
READY: Schema = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": {"type": "string"},
        "snapshot": {"type": "string"},
        "age_seconds": {"type": "number"},
        "synced_at": {
            "type": "object",
            "additionalProperties": {"type": "string", "format": "date-time"},
            "description": "When each stream last synced successfully.",
        },
        "stale": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Present (and the answer 503) while streams are past "
            "DUCTWORK_SERVE_MAX_AGE_S: their names.",
        },
        "key_file": {
            "type": "string",
            "description": "Present while the key file on disk cannot be read: why, since "
            "when, and which keys are used meanwhile.",
        },
        "refused": {
            "type": "string",
            "description": "Present while the newest snapshot is refused (its checksum or "
            "its definitions are not its publisher's): which, and why; the last good one is "
            "served.",
        },
    },
}

_ERROR_OBJECT: Schema = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string", "enum": [code.value for code in ErrorCode]},
        "message": {"type": "string"},
        "field": {"type": "string"},
    },
}
PRODUCT_ERROR: Schema = {
    "type": "object",
    "required": ["success", "data", "errors"],
    "properties": {
        "success": _FALSE,
        "data": {"type": "null"},
        "errors": {"type": "array", "minItems": 1, "items": _ERROR_OBJECT},
    },
}
DATA_WAREHOUSE_ERROR: Schema = {
    "type": "object",
    "required": ["success", "data", "errors"],
    "properties": {
        "success": _FALSE,
        "data": {"type": ["object", "null"], "maxProperties": 0},
        "errors": {"type": "array", "minItems": 1, "items": {"type": "string"}},
    },
}
PROBLEM: Schema = {
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string", "enum": [f"/problems/{code.slug}" for code in ErrorCode]},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "instance": {"type": "string"},
    },
}
