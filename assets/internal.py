"""Internal family assets: contractors, indoor models, the manuals listing (the product
images are in ``assets.product_images``)."""

import itertools
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present
from assets.ingest import fetch, ingest_asset, run_metadata
from assets.resources import ObjectStore, UpstreamResource, open_warehouse
from ductwork.contract.encoding import dumps, loads
from ductwork.contract.manuals import MANUALS_PREFIX, manual_item
from ductwork.contract.paths import CONTRACTORS, INDOOR_MODELS
from ductwork.store.columns import Columns
from ductwork.store.loading import (
    Held,
    ListContent,
    Record,
    Replacement,
    RowOf,
    replace_rows,
    rows_table,
    text_or_none,
    timestamp_or_none,
)
from ductwork.upstream.list_reader import bodies_digest
from ductwork.upstream.schema_drift import CONTRACTOR_RECORD, INDOOR_MODEL_RECORD
from warehouse_sql import read_sql

GROUP = "internal"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


CONTRACTOR_SCHEMA = Columns(
    ("contractor_id", "string"), ("name", "string"), ("city", "string"),
    ("state", "string"), ("rating", "float64"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
REVIEW_SCHEMA = Columns(
    ("review_id", "string"), ("contractor_id", "string"), ("rating", "float64"),
    ("text", "string"), ("created_at", "timestamp"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
RAW_SCHEMA = Columns(("body", "string"), ("parse_error", "string"), ("synced_at", "timestamp"))


def parse_contractors(data: object) -> tuple[list[Record], str | None]:
    """The contractors inside the ``data`` JSON text, or an empty list and why."""
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


@ingest_asset(
    group=GROUP,
    description=(
        "Contractors with reviews: the answer kept verbatim (its `data` is a JSON text) and "
        "parsed into `contractors` and `contractor_reviews`; an answer unchanged since the last "
        "write is not written again."
    ),
)
def internal_contractors(
    upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Mirror the contractors answer and its parsed contents; an answer byte for byte the one
    last stored is not written again."""
    fetched = fetch(upstream, lambda client: client.get(CONTRACTORS, parse_json=True))
    body = fetched.value.json()
    contractors, problem = parse_contractors(body.get("data"))
    reviews = [
        {**review, "__contractor": str(item["contractorId"])}
        for item in contractors
        for review in item.get("reviews") or []
        if isinstance(review, dict) and "reviewId" in review
    ]
    content = ListContent(
        "internal_contractors", bodies_digest(fetched.value.body), len(contractors)
    )
    with open_warehouse(warehouse) as con:
        unchanged = content.already_stored(con, Held("contractors"))
        if not unchanged:
            tables = _contractor_tables(fetched.value.body, problem, contractors, reviews)
            replace_rows(con, *tables, content=content)
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched,
            len(contractors),
            reviews=len(reviews),
            parse_error=problem or "",
            unchanged=unchanged,
            **CONTRACTOR_RECORD.drift(contractors),
        )
    )


def _contractor_tables(
    body: bytes, problem: str | None, contractors: list[Record], reviews: list[Record]
) -> tuple[Replacement, ...]:
    """The contractors answer as stored: verbatim, its contractors, and their reviews."""
    now = datetime.now(UTC)
    raw = RAW_SCHEMA.table([{"body": body.decode(), "parse_error": problem, "synced_at": now}])
    contractor_rows = rows_table(
        contractors,
        lambda c: {
            "contractor_id": str(c["contractorId"]),
            "name": text_or_none(c.get("name")),
            "city": text_or_none(c.get("city")),
            "state": text_or_none(c.get("state")),
            "rating": _number(c.get("rating")),
        },
        CONTRACTOR_SCHEMA,
        now,
    )
    review_rows = REVIEW_SCHEMA.table(
        [
            {
                "review_id": str(r["reviewId"]),
                "contractor_id": r["__contractor"],
                "rating": _number(r.get("rating")),
                "text": text_or_none(r.get("text")),
                "created_at": timestamp_or_none(r.get("createdAt")),
                "record": dumps({k: v for k, v in r.items() if k != "__contractor"}).decode(),
                "synced_at": now,
            }
            for r in reviews
        ]
    )
    return (
        Replacement("contractors_raw", raw),
        Replacement("contractors", contractor_rows),
        Replacement("contractor_reviews", review_rows),
    )


INDOOR_MODEL_SCHEMA = Columns(
    ("ordinal", "int32"), ("model", "string"), ("sku", "string"),
    ("series", "string"), ("family", "string"), ("capacity_btuh", "float64"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip


def _indoor_model_row() -> RowOf:
    """A row builder for one pass over the indoor models, numbering them in list order."""
    ordinals = itertools.count()
    return lambda m: {
        "ordinal": next(ordinals),
        "model": text_or_none(m.get("model")),
        "sku": text_or_none(m.get("sku")),
        "series": text_or_none(m.get("series")),
        "family": text_or_none(m.get("family")),
        "capacity_btuh": _number(m.get("capacityBtuh")),
    }


@ingest_asset(
    group=GROUP,
    description="Indoor product models (no key; its 429 is routine: the client waits and retries).",
)
def internal_indoor_models(
    upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Mirror the indoor models list, in the upstream's order; an answer byte for byte the one
    last stored is not written again."""
    fetched = fetch(upstream, lambda client: client.get(INDOOR_MODELS, auth=False, parse_json=True))
    models = [m for m in fetched.value.document.get("data") or [] if isinstance(m, dict)]
    content = ListContent("internal_indoor_models", bodies_digest(fetched.value.body), len(models))
    with open_warehouse(warehouse) as con:
        unchanged = content.already_stored(con, Held("indoor_models"))
        if not unchanged:
            table = rows_table(models, _indoor_model_row(), INDOOR_MODEL_SCHEMA)
            replace_rows(con, Replacement("indoor_models", table), content=content)
        drift = content.drift(con, INDOOR_MODEL_RECORD, models)
    return dg.MaterializeResult(
        metadata=run_metadata(fetched, len(models), unchanged=unchanged, **drift)
    )


MANUAL_SCHEMA = Columns(
    ("key", "string"), ("size_bytes", "int64"), ("last_modified", "timestamp"),
    ("etag", "string"), ("content_type", "string"), ("url", "string"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip


@ingest_asset(
    group=GROUP,
    kinds={"s3", "duckdb"},
    description=(
        "The bucket's `manuals/` objects (what /internal/v1.0/digital-assets lists), listed "
        "with boto3; objects whose ETag and LastModified are unchanged are not re-read, and a "
        "listing unchanged item for item is not written again."
    ),
)
def internal_manuals(object_store: ObjectStore, warehouse: DuckDBResource) -> dg.MaterializeResult:
    """Mirror the manuals listing; content types come from HEAD only for changed objects."""
    s3 = object_store.api_client()
    with open_warehouse(warehouse) as con:
        stored = con.execute(read_sql("manuals_stored")).fetchall()
        known = {key: (etag, modified, kind) for key, etag, modified, kind, _ in stored}
        listed: list[dict[str, Any]] = []
        heads = 0
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=object_store.bucket, Prefix=MANUALS_PREFIX
        ):
            for obj in page.get("Contents") or []:
                key, etag = obj["Key"], obj["ETag"].strip('"')
                modified = obj["LastModified"].astimezone(UTC)
                previous = known.get(key)
                if previous is not None and previous[:2] == (etag, modified):
                    content_type = previous[2]
                else:
                    heads += 1
                    head = s3.head_object(Bucket=object_store.bucket, Key=key)
                    content_type = head.get("ContentType")
                listed.append({
                    "key": key, "size_bytes": obj["Size"], "last_modified": modified,
                    "etag": etag, "content_type": content_type,
                    "url": object_store.object_url(key),
                })  # fmt: skip
        for row in listed:
            item = manual_item(
                row["key"], row["url"], row["size_bytes"], row["last_modified"], row["etag"],
                row["content_type"],
            )  # fmt: skip
            row["record"] = dumps(item).decode()
            row["synced_at"] = datetime.now(UTC)
        # A listing item for item the one stored is not written again.
        unchanged = {row["key"]: row["record"] for row in listed} == {
            key: record for key, *_, record in stored
        }
        if not unchanged:
            table = MANUAL_SCHEMA.table(listed)
            replace_rows(con, Replacement("manuals", table))
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(listed), "head_requests": heads, "unchanged": unchanged}
    )


INTERNAL_ASSETS: list[dg.AssetsDefinition] = [
    internal_contractors,
    internal_indoor_models,
    internal_manuals,
]
INTERNAL_CHECKS: list[AssetRule] = [
    keys_unique_and_present(internal_contractors.key, "contractors", ["contractor_id"]),
    keys_unique_and_present(internal_manuals.key, "manuals", ["key"]),
]
