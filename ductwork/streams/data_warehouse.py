"""The data warehouse family's streams: ``digital-assets`` (incremental on ``updatedAfter``) and
``submittals`` (one request per pairing and standalone unit of the catalog)."""

from __future__ import annotations

from typing import Any

from ductwork.contract import paths
from ductwork.contract.paths import Family
from ductwork.streams.model import EVERY_15_MINUTES, NIGHTLY, Serving, Step, Stream, Table
from ductwork.streams.products import PAIRINGS, PRODUCTS
from ductwork.sync.derived_requests import DerivedRequests
from ductwork.sync.updated_after import UpdatedAfter
from ductwork.upstream.paging import UpdatedAfterPaging
from ductwork.upstream.schema_drift import NULL, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Record, text_or_none, timestamp_or_none

SUBMITTAL_DATA = f"{paths.DATA_WAREHOUSE_PREFIX}/submittal-data"

DIGITAL_ASSET_RECORD = RecordShape(
    required={
        "assetId": str, "sku": (str, NULL), "assetType": str, "title": str, "url": str,
        "mimeType": str, "language": (str, NULL), "fileSizeBytes": int, "createdAt": str,
        "updatedAt": str,
    },
    notes={
        "assetId": "Id (string).",
        "sku": "SKU or null.",
        "assetType": "`Manual`, `Brochure`, `Spec Sheet`, `Submittal`, `Image` or `Video`.",
        "updatedAt": "Date-time; the list's order and the `updatedAfter` filter use it.",
    },
)  # fmt: skip
SUBMITTAL_RECORD = RecordShape(
    required={
        "idu": (str, NULL), "odu": (str, NULL), "ahriNumber": (str, NULL), "documentUrl": str,
        "systemPerformance": dict, "updatedAt": str,
    },
    notes={
        "idu": "Indoor unit SRN.",
        "odu": "Outdoor unit SRN.",
        "ahriNumber": "AHRI certificate number.",
        "documentUrl": "Link to the document.",
    },
)  # fmt: skip

DIGITAL_ASSET_COLUMNS = Columns(
    ("asset_id", "string"), ("sku", "string"), ("asset_type", "string"),
    ("title", "string"), ("url", "string"), ("mime_type", "string"),
    ("language", "string"), ("file_size_bytes", "int64"), ("created_at", "timestamp"),
    ("updated_at", "timestamp"), ("updated_at_text", "string"), ("record", "string"),
    ("deleted_at", "timestamp"), ("synced_at", "timestamp")
)  # fmt: skip
SUBMITTAL_COLUMNS = Columns(
    ("request_key", "string"), ("idu", "string"), ("odu", "string"),
    ("found", "bool"), ("ahri_number", "string"), ("document_url", "string"),
    ("updated_at", "timestamp"), ("source_signature", "string"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip


def digital_asset_row(record: Record) -> dict[str, Any]:
    """Typed columns of a warehouse digital asset."""
    size = record.get("fileSizeBytes")
    return {
        "asset_id": str(record["assetId"]),
        "sku": text_or_none(record.get("sku")),
        "asset_type": text_or_none(record.get("assetType")),
        "title": text_or_none(record.get("title")),
        "url": text_or_none(record.get("url")),
        "mime_type": text_or_none(record.get("mimeType")),
        "language": text_or_none(record.get("language")),
        "file_size_bytes": size if isinstance(size, int) and not isinstance(size, bool) else None,
        "created_at": timestamp_or_none(record.get("createdAt")),
        "updated_at": timestamp_or_none(record.get("updatedAt")),
        "updated_at_text": text_or_none(record.get("updatedAt")),
        "deleted_at": None,
    }


def submittal_row(record: Record) -> dict[str, Any]:
    """Typed columns of a submittal found."""
    return {
        "ahri_number": text_or_none(record.get("ahriNumber")),
        "document_url": text_or_none(record.get("documentUrl")),
        "updated_at": timestamp_or_none(record.get("updatedAt")),
    }


# Page numbers from an updatedAfter on, in (updatedAt, assetId) order.
DIGITAL_ASSET_PAGING = UpdatedAfterPaging(
    paths.DATA_WAREHOUSE_DIGITAL_ASSETS, updated_member="updatedAt", id_member="assetId"
)
DIGITAL_ASSETS = Stream(
    name="digital-assets",
    family=Family.DATA_WAREHOUSE,
    key="assetId",
    path=paths.DATA_WAREHOUSE_DIGITAL_ASSETS,
    description="Warehouse digital assets (manuals, brochures, spec sheets, images, videos).",
    cadence=EVERY_15_MINUTES,
    shape=DIGITAL_ASSET_RECORD,
    steps=(
        Step(
            asset="warehouse_digital_assets",
            description=(
                "Warehouse digital assets, incremental on a (updatedAt, assetId) resume point "
                "committed with the rows; a walk cut short resumes at its next page; "
                "mode=reconcile lists everything and marks vanished assets deleted."
            ),
            reader=UpdatedAfter(
                "digital_assets",
                DIGITAL_ASSET_PAGING,
                digital_asset_row,
                DIGITAL_ASSET_COLUMNS,
                DIGITAL_ASSET_RECORD,
            ),
            table=Table("digital_assets", ("asset_id",)),
        ),
    ),
    serving=Serving.PAGED_LIST,
)

SUBMITTALS = Stream(
    name="submittals",
    family=Family.DATA_WAREHOUSE,
    key="idu|odu",
    path=SUBMITTAL_DATA,
    description="Submittal data for every Pairing (P1/P2 SRNs) and Standalone unit.",
    cadence=NIGHTLY,
    shape=SUBMITTAL_RECORD,
    steps=(
        Step(
            asset="warehouse_submittals",
            description=(
                "Submittal data for every Pairing (P1/P2 SRNs) and Standalone unit; incremental "
                "runs fetch only requests that are new or whose pairing or units changed."
            ),
            reader=DerivedRequests(
                SUBMITTAL_DATA,
                ("idu", "odu"),
                "submittals",
                submittal_row,
                SUBMITTAL_COLUMNS,
                SUBMITTAL_RECORD,
            ),
            table=Table("submittals", ("request_key",)),
            # The unit lists and the pairings, whose rows the requests derive from.
            after=(*(s.asset for s in PRODUCTS.steps if s.table.name == "units"), *PAIRINGS.assets),
        ),
    ),
    serving=Serving.LOOKUP,
)
