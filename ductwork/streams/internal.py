"""The internal family's streams: ``contractors`` (an answer whose ``data`` is a JSON text),
``indoor-models`` (no key needed) and ``manuals`` (the bucket's ``manuals/`` objects)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb

from ductwork.contract import paths
from ductwork.contract.encoding import dumps, format_datetime, loads
from ductwork.contract.paths import Family
from ductwork.streams.model import NIGHTLY, Serving, Step, Stream, Table
from ductwork.sync.bucket_listing import BucketListing
from ductwork.sync.documents import Document, one_row_each
from ductwork.upstream.schema_drift import NULL, NUMBER, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import (
    Record,
    Replacement,
    count_rows,
    rows_table,
    text_or_none,
    timestamp_or_none,
)
from warehouse_sql import section

CONTRACTORS_PATH = f"{paths.INTERNAL_PREFIX}/accounts/contractors"
INDOOR_MODELS_PATH = f"{paths.INTERNAL_PREFIX}/products/indoor-models"
MANUALS_PATH = f"{paths.INTERNAL_PREFIX}/digital-assets"
CONTRACTOR_RECORD = RecordShape(
    required={
        "contractorId": str, "name": str, "city": str, "state": str, "rating": NUMBER,
        "reviews": list,
    },
    notes={"reviews": "`[{reviewId, rating, text, createdAt}]`."},
)  # fmt: skip
INDOOR_MODEL_RECORD = RecordShape(
    required={"model": str, "sku": str, "series": str, "family": str, "capacityBtuh": NUMBER},
    notes={"model": "Model name.", "sku": "SKU.", "capacityBtuh": "Capacity in BTU/h."},
)
MANUALS_PREFIX = "manuals/"  # what the listing lists: objects whose key starts with it


def manual_item(
    key: str, url: str, size: int, last_modified: datetime, etag: str, content_type: str | None
) -> dict[str, Any]:
    """One listing item, in the contract's member order and forms."""
    return {
        "key": key,
        "url": url,
        "sizeBytes": size,
        "lastModified": format_datetime(last_modified),
        "etag": etag.strip('"'),
        "contentType": content_type,
    }


MANUAL_RECORD = RecordShape(
    required={
        "key": str, "url": str, "sizeBytes": int, "lastModified": str, "etag": str,
        "contentType": (str, NULL),
    },
)  # fmt: skip

RAW_COLUMNS = Columns(("body", "string"), ("parse_error", "string"), ("synced_at", "timestamp"))
CONTRACTOR_COLUMNS = Columns(
    ("contractor_id", "string"), ("name", "string"), ("city", "string"),
    ("state", "string"), ("rating", "float64"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
REVIEW_COLUMNS = Columns(
    ("review_id", "string"), ("contractor_id", "string"), ("rating", "float64"),
    ("text", "string"), ("created_at", "timestamp"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
INDOOR_MODEL_COLUMNS = Columns(
    ("ordinal", "int32"), ("model", "string"), ("sku", "string"),
    ("series", "string"), ("family", "string"), ("capacity_btuh", "float64"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
MANUAL_COLUMNS = Columns(
    ("key", "string"), ("size_bytes", "int64"), ("last_modified", "timestamp"),
    ("etag", "string"), ("content_type", "string"), ("url", "string"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip
CONTRACTORS_RAW = Table("contractors_raw", ())
CONTRACTOR_TABLE = Table("contractors", ("contractor_id",))
REVIEWS = Table("contractor_reviews", ("contractor_id", "review_id"))
INDOOR_MODEL_TABLE = Table("indoor_models", ("ordinal",))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_contractors(document: Any) -> tuple[list[Record], str | None]:
    """The contractors inside the answer's ``data`` JSON text, or an empty list and why."""
    data = document.get("data") if isinstance(document, dict) else None
    if data is None:
        return [], None
    if not isinstance(data, str):
        return [], f"data is a {type(data).__name__}, not a JSON text"
    try:
        parsed = loads(data)
    except ValueError as exc:
        return [], f"data is not valid JSON: {exc}"
    if not isinstance(parsed, list):
        return [], "data does not hold a list"
    return [item for item in parsed if isinstance(item, dict) and "contractorId" in item], None


def contractors_answer_without(body: bytes | str, keys: set[str]) -> bytes | None:
    """A contractors answer without the contractors of ``keys`` in its ``data`` text (None
    when it holds none of them, or cannot be read as such)."""
    try:
        document = loads(body)
        data = document.get("data") if isinstance(document, dict) else None
        contractors = loads(data) if isinstance(data, str) else None
    except ValueError:
        return None
    if not isinstance(contractors, list):
        return None
    kept = [
        item for item in contractors
        if not (isinstance(item, dict) and str(item.get("contractorId")) in keys)
    ]  # fmt: skip
    if len(kept) == len(contractors):
        return None
    document["data"] = dumps(kept).decode()
    return dumps(document)


def without_suppressed(
    con: duckdb.DuckDBPyConnection, body: bytes, contractors: list[Record]
) -> tuple[bytes, list[Record]]:
    """The contractors answer without the contractors ``ductwork forget --suppress`` keeps
    out (``warehouse_sql/erasure.sql``)."""
    ids = [str(contractor["contractorId"]) for contractor in contractors]
    params = {"stream": "contractors", "keys": ids}
    rows = con.execute(section("erasure", "suppressed"), params).fetchall()
    suppressed = {row[0] for row in rows}
    if not suppressed:
        return body, contractors
    kept = [c for c in contractors if str(c["contractorId"]) not in suppressed]
    return contractors_answer_without(body, suppressed) or body, kept


def contractor_tables(
    body: bytes, contractors: list[Record], problem: str | None
) -> list[Replacement]:
    """The contractors answer as stored: verbatim, its contractors, and their reviews."""
    now = datetime.now(UTC)
    raw = RAW_COLUMNS.table([{"body": body.decode(), "parse_error": problem, "synced_at": now}])
    contractor_rows = rows_table(
        contractors,
        lambda c: {
            "contractor_id": str(c["contractorId"]),
            "name": text_or_none(c.get("name")),
            "city": text_or_none(c.get("city")),
            "state": text_or_none(c.get("state")),
            "rating": _number(c.get("rating")),
        },
        CONTRACTOR_COLUMNS,
        now,
    )
    review_rows = REVIEW_COLUMNS.table(
        [
            {
                "review_id": str(review["reviewId"]),
                "contractor_id": str(contractor["contractorId"]),
                "rating": _number(review.get("rating")),
                "text": text_or_none(review.get("text")),
                "created_at": timestamp_or_none(review.get("createdAt")),
                "record": dumps(review).decode(),
                "synced_at": now,
            }
            for contractor in contractors
            for review in contractor.get("reviews") or []
            if isinstance(review, dict) and "reviewId" in review
        ]
    )
    return [
        Replacement(CONTRACTORS_RAW, raw),
        Replacement(CONTRACTOR_TABLE, contractor_rows),
        Replacement(REVIEWS, review_rows),
    ]


def indoor_model_row(model: Record) -> dict[str, Any]:
    """Typed columns of an indoor model."""
    return {
        "model": text_or_none(model.get("model")),
        "sku": text_or_none(model.get("sku")),
        "series": text_or_none(model.get("series")),
        "family": text_or_none(model.get("family")),
        "capacity_btuh": _number(model.get("capacityBtuh")),
    }


CONTRACTORS = Stream(
    name="contractors",
    family=Family.INTERNAL,
    key="contractorId",
    path=CONTRACTORS_PATH,
    description="Contractors with their reviews.",
    cadence=NIGHTLY,
    shape=CONTRACTOR_RECORD,
    steps=(
        Step(
            asset="internal_contractors",
            description=(
                "Contractors with reviews: the answer kept verbatim (its `data` is a JSON "
                "text) and parsed into `contractors` and `contractor_reviews`; an answer "
                "unchanged since the last write is not written again."
            ),
            reader=Document(
                CONTRACTORS_PATH,
                contractor_tables,
                CONTRACTOR_RECORD,
                parse=parse_contractors,
                facts=lambda con: {"reviews": count_rows(con, REVIEWS)},
                suppress=without_suppressed,
            ),
            table=CONTRACTOR_TABLE,
        ),
    ),
    serving=Serving.DOCUMENT,
    records_in_text=True,
    extra_tables=(CONTRACTORS_RAW, REVIEWS),
    personal_key="contractor_id",
)

INDOOR_MODELS = Stream(
    name="indoor-models",
    family=Family.INTERNAL,
    key="sku",
    path=INDOOR_MODELS_PATH,
    description="Indoor product models, in the upstream's order.",
    cadence=NIGHTLY,
    shape=INDOOR_MODEL_RECORD,
    steps=(
        Step(
            asset="internal_indoor_models",
            description=(
                "Indoor product models (no key; its 429 is routine: the client waits and retries)."
            ),
            reader=Document(
                INDOOR_MODELS_PATH,
                one_row_each(INDOOR_MODEL_TABLE, INDOOR_MODEL_COLUMNS, indoor_model_row),
                INDOOR_MODEL_RECORD,
                auth=False,
            ),
            table=INDOOR_MODEL_TABLE,
        ),
    ),
    serving=Serving.DOCUMENT,
    open_access=True,
)

MANUALS = Stream(
    name="manuals",
    family=Family.INTERNAL,
    key="key",
    path=MANUALS_PATH,
    description="Public digital assets: the bucket's manuals/ objects.",
    cadence=NIGHTLY,
    shape=MANUAL_RECORD,
    steps=(
        Step(
            asset="internal_manuals",
            description=(
                "The bucket's `manuals/` objects (what /internal/v1.0/digital-assets lists), "
                "listed with boto3; objects whose ETag and LastModified are unchanged are not "
                "re-read, and a listing unchanged item for item is not written again."
            ),
            reader=BucketListing(MANUALS_PREFIX, manual_item, "manuals", MANUAL_COLUMNS),
            table=Table("manuals", ("key",)),
            kinds=frozenset({"s3", "duckdb"}),
        ),
    ),
    serving=Serving.DOCUMENT,
)
