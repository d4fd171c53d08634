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

Schema = dict[str, Any]

_TRUE: Schema = {"type": "boolean", "const": True}
_FALSE: Schema = {"type": "boolean", "const": False}
_NO_ERRORS: Schema = {"type": "array", "maxItems": 0}


def record(description: str, key: str | None = None, **members: str) -> Schema:
    """An upstream record as received: an object, with ``key`` present when given."""
    schema: Schema = {
        "type": "object",
        "description": description,
        "properties": {name: {"description": text} for name, text in members.items()},
    }
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

CATALOG_ITEM = record(
    "A catalog entry as received.",
    "sku",
    sku="SKU (string).",
    srn="Service reference number (string).",
    type="Route slug of the product's type.",
    _links="`{self: {href}}`: the record's path.",
)
UNIT = record(
    "A unit record as received; each type adds members of its own in `specifications`.",
    "sku",
    sku="SKU (string).",
    srn="Service reference number (string).",
    brand="Brand; the `brand` filter matches it exactly, ignoring case.",
    category="`INDOOR` or `OUTDOOR`.",
    subcategory="e.g. `Wall Mounted`, `Ducted`, `Branch Box`.",
    series="`{name}`; the `series.name` filter matches it.",
    family="`{name}`; the `family.name` filter matches it.",
    status="`Active` or `Discontinued`.",
    specifications="Free-form object.",
    performance="Capacities and efficiencies, or null.",
    compatibility="`{compatibleSkus: [string]}`.",
    images="`[{url, kind, width, height}]`.",
    updatedAt="Date-time.",
    _links="`{self: {href}}`: the record's path.",
)
PAIRING = record(
    "A pairing as received.",
    "relationshipId",
    relationshipId="Integer id.",
    relType="`Pairing`, `Standalone` or `Combinations`.",
    products="Up to three `{position, sku, srn, type, _links}`.",
    updatedAt="Date-time.",
)
ASSET = record(
    "A warehouse digital asset as received.",
    "assetId",
    assetId="Id (string).",
    sku="SKU or null.",
    assetType="`Manual`, `Brochure`, `Spec Sheet`, `Submittal`, `Image` or `Video`.",
    updatedAt="Date-time; the list's order and the `updatedAfter` filter use it.",
)
SUBMITTAL = record(
    "A submittal as received.",
    None,
    idu="Indoor unit SRN.",
    odu="Outdoor unit SRN.",
    ahriNumber="AHRI certificate number.",
    documentUrl="Link to the document.",
    systemPerformance="Object.",
)
LEAD_ITEM = record(
    "A lead list item as received, or its projection by `fields` (`Id` and `CreatedDate` "
    "always kept).",
    "Id",
    Id="Lead id.",
    CreatedDate="Date-time; the list's order and cursor use it.",
)
LEAD_DETAIL = record("The lead detail object as received (no envelope).", "id", id="Lead id.")
INDOOR_MODEL = record(
    "An indoor model as received.",
    None,
    model="Model name.",
    sku="SKU.",
    capacityBtuh="Capacity in BTU/h.",
)
MANUAL: Schema = {
    "type": "object",
    "required": ["key", "url", "sizeBytes", "lastModified", "etag", "contentType"],
    "properties": {
        "key": {"type": "string"},
        "url": {"type": "string"},
        "sizeBytes": {"type": "integer", "minimum": 0},
        "lastModified": {"type": "string"},
        "etag": {"type": "string"},
        "contentType": {"type": ["string", "null"]},
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


PAIRING_LIST = lookup(
    {
        "type": "object",
        "required": ["pairings", "pagination"],
        "properties": {"pairings": {"type": "array", "items": PAIRING}, "pagination": PAGINATION},
    }
)
ASSET_LIST: Schema = {
    "type": "object",
    "required": ["success", "data", "errors", "pagination", "filters"],
    "properties": {
        "success": _TRUE,
        "data": {"type": "array", "items": ASSET},
        "errors": _NO_ERRORS,
        "pagination": PAGINATION,
        "filters": {
            "type": "object",
            "required": ["updatedAfter"],
            "properties": {"updatedAfter": {"type": ["string", "null"]}},
        },
    },
}
CONTRACTORS = record(
    "The upstream's answer as received.",
    None,
    success="Boolean.",
    message="String.",
    data="A JSON text of the contractors with their reviews, or null.",
)
INTERNAL_LIST_OF = {
    "indoor": {
        "type": "object",
        "required": ["success", "data"],
        "properties": {"success": _TRUE, "data": {"type": "array", "items": INDOOR_MODEL}},
    },
    "manuals": {
        "type": "object",
        "required": ["success", "data"],
        "properties": {"success": _TRUE, "data": {"type": "array", "items": MANUAL}},
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
        "key_file": {
            "type": "string",
            "description": "Present while the key file on disk cannot be read: why, since "
            "when, and which keys are used meanwhile.",
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
WAREHOUSE_ERROR: Schema = {
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
