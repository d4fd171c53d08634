"""The peer: the same streams pulled into DuckDB by dlt's ``rest_api`` source.

Configured the way dlt's documentation advises for such an API: a page-number paginator on
the page/count lists, a custom paginator for the lead list's (cursorCreatedDate, cursorId)
cursor, incremental loading on ``updatedAfter`` (digital assets) and ``createdAfter`` (leads),
merge on primary keys, and dependent resources for the per-lead details and the per-pairing
submittals (404 answers ignored). Tuned as dlt's performance documentation allows: every
resource ``parallelized: True``, 8 extract workers (``EXTRACT__WORKERS``, the sync's own bound
on requests in flight), ``max_table_nesting=0`` (records kept as JSON columns, no child
tables) and Parquet load files, which dlt's DuckDB destination documentation suggests whenever
pyarrow is installed.

Installed only with the ``bench`` dependency group (``uv sync --group bench``).

    uv run --group bench python -m bench.dlt_peer --url URL --api-key KEY --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import dlt
from dlt.sources.helpers.requests import Request, Response
from dlt.sources.helpers.rest_client.paginators import BasePaginator
from dlt.sources.rest_api import rest_api_source

from ductwork.contract import paths
from ductwork.streams.registry import CONTRACTORS, INDOOR_MODELS, PAIRINGS, SUBMITTALS

PAGE = 1000
WORKERS = 8
EARLIEST = "2000-01-01T00:00:00.000Z"
SIDES = {"indoor-units": "idu", "outdoor-units": "odu"}


class LeadCursorPaginator(BasePaginator):
    """The lead list's cursor: the (CreatedDate, Id) of the last lead of the previous page."""

    def __init__(self) -> None:
        super().__init__()
        self._cursor: tuple[str, str] | None = None

    def update_state(self, response: Response, data: list[Any] | None = None) -> None:
        leads = data or []
        if len(leads) < PAGE:
            self._has_next_page = False
        else:
            self._cursor = (leads[-1]["CreatedDate"], leads[-1]["Id"])

    def update_request(self, request: Request) -> None:
        if request.params is None:
            request.params = {}
        request.params["cursorCreatedDate"], request.params["cursorId"] = self._cursor


def _page_numbers(total_path: str = "pagination.totalPages") -> dict[str, Any]:
    return {"type": "page_number", "base_page": 1, "page_param": "page", "total_path": total_path}


def _submittal_queries() -> Any:
    """A map step turning each pairing into the submittal queries it implies, deduplicated."""
    seen: set[str] = set()

    def queries(pairing: dict[str, Any]) -> Iterator[list[dict[str, str]]]:
        products = pairing.get("products") or []
        wanted: list[dict[str, str]] = []
        if pairing.get("relType") == "Pairing":
            srn = {p.get("position"): p.get("srn") for p in products}
            pair = {"idu": srn.get("P1"), "odu": srn.get("P2")}
            wanted.append({k: v for k, v in pair.items() if v})
        elif pairing.get("relType") == "Standalone":
            wanted += [
                {SIDES[p["type"]]: p["srn"]}
                for p in products
                if p.get("type") in SIDES and p.get("srn")
            ]
        fresh = []
        for params in wanted:
            query = urlencode(params)
            if params and query not in seen:
                seen.add(query)
                fresh.append({"query": query})
        if fresh:  # a dependent resource reads its parent's items a page (list) at a time
            yield fresh

    return queries


# A dependent resource's 404 (a lead's details, a pairing's submittals): no record, no error.
NOT_FOUND_IS_NOTHING = [{"status_code": 404, "action": "ignore"}]


def _page_list(
    listed: dict[str, int], name: str, path: str, key: str, **extra: Any
) -> dict[str, Any]:
    """A resource over a page/count list, its pages asked with ``listed``'s parameters."""
    return {
        "name": name,
        "primary_key": key,
        "endpoint": {
            "path": path.lstrip("/"),
            "params": listed,
            "paginator": _page_numbers(extra.pop("total_path", "pagination.totalPages")),
            "data_selector": extra.pop("data_selector", "data"),
            **extra,
        },
    }


def _product_resources(listed: dict[str, int]) -> list[Any]:
    """The product list, each kind of unit, the pairings and the submittals they imply."""
    return [
        _page_list(listed, "products", paths.PRODUCTS_LIST, "sku"),
        *(
            _page_list(listed, slug.replace("-", "_"), paths.unit_path(slug), "sku")
            for slug in paths.UNIT_SLUGS
        ),
        _page_list(
            listed,
            "pairings",
            PAIRINGS.path,
            "relationshipId",
            data_selector="data.pairings",
            total_path="data.pagination.totalPages",
        ),
        {
            **_page_list(
                listed,
                "submittal_requests",
                PAIRINGS.path,
                "relationshipId",
                data_selector="data.pairings",
                total_path="data.pagination.totalPages",
            ),
            "selected": False,
            "processing_steps": [{"yield_map": _submittal_queries()}],
        },
        {
            "name": "submittals",
            "primary_key": "_submittal_requests_query",
            "include_from_parent": ["query"],
            "endpoint": {
                "path": SUBMITTALS.path.lstrip("/") + "?{resources.submittal_requests.query}",
                "paginator": "single_page",
                "data_selector": "data",
                "response_actions": NOT_FOUND_IS_NOTHING,
            },
        },
    ]


def _asset_and_lead_resources(listed: dict[str, int]) -> list[Any]:
    """The digital assets and the leads, each loaded incrementally, and each lead's details."""
    return [
        _page_list(
            listed,
            "digital_assets",
            paths.DATA_WAREHOUSE_DIGITAL_ASSETS,
            "assetId",
            incremental={
                "start_param": "updatedAfter",
                "cursor_path": "updatedAt",
                "initial_value": EARLIEST,
            },
        ),
        {
            "name": "leads",
            "primary_key": "Id",
            "endpoint": {
                "path": paths.LEADS.lstrip("/"),
                "params": listed,
                "paginator": LeadCursorPaginator(),
                "data_selector": "data",
                "incremental": {
                    "start_param": "createdAfter",
                    "cursor_path": "CreatedDate",
                    "initial_value": EARLIEST,
                },
            },
        },
        {
            "name": "lead_details",
            "primary_key": "id",
            "endpoint": {
                "path": paths.LEADS.lstrip("/") + "/{resources.leads.Id}",
                "paginator": "single_page",
                "data_selector": "$",
                "response_actions": NOT_FOUND_IS_NOTHING,
            },
        },
    ]


def _single_page_resources() -> list[Any]:
    """The contractors and the indoor models, each one answer."""
    return [
        {
            "name": "contractors",
            "write_disposition": "replace",
            "endpoint": {
                "path": CONTRACTORS.path.lstrip("/"),
                "paginator": "single_page",
                "data_selector": "$",
            },
        },
        {
            "name": "indoor_models",
            "primary_key": "sku",
            "endpoint": {
                "path": INDOOR_MODELS.path.lstrip("/"),
                "paginator": "single_page",
                "data_selector": "data",
            },
        },
    ]


def source(url: str, api_key: str) -> Any:
    """The rest_api source over every stream a ductwork full sync reads."""
    listed = {"count": PAGE}
    resources: list[Any] = [
        *_product_resources(listed),
        *_asset_and_lead_resources(listed),
        *_single_page_resources(),
    ]
    return rest_api_source(
        {
            "client": {
                "base_url": url.rstrip("/") + "/",
                "auth": {"type": "bearer", "token": api_key},
            },
            "resource_defaults": {"write_disposition": "merge", "parallelized": True},
            "resources": resources,
        },
        max_table_nesting=0,
        parallelized=True,
    )


def run(url: str, api_key: str, folder: Path, file_format: str = "parquet") -> dict[str, Any]:
    """One pipeline run into ``folder``/peer.duckdb through ``file_format`` load files; its
    seconds, each dlt step's seconds (extract, normalize, load) and rows loaded per table."""
    folder.mkdir(parents=True, exist_ok=True)
    pipeline = dlt.pipeline(
        pipeline_name="peer",
        pipelines_dir=str(folder / "pipelines"),
        destination=dlt.destinations.duckdb(str(folder / "peer.duckdb")),
        dataset_name="upstream",
    )
    started = time.perf_counter()
    pipeline.run(source(url, api_key), loader_file_format=file_format)
    seconds = time.perf_counter() - started
    trace = pipeline.last_trace
    steps = {
        step.step: (step.finished_at - step.started_at).total_seconds() for step in trace.steps
    }
    rows = trace.last_normalize_info.row_counts
    return {"seconds": seconds, "steps": steps, "rows": dict(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument(
        "--file-format", default="parquet", help="dlt's load files: parquet or insert_values"
    )
    options = parser.parse_args()
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")
    os.environ.setdefault("EXTRACT__WORKERS", str(WORKERS))
    print(json.dumps(run(options.url, options.api_key, options.dir, options.file_format)))


if __name__ == "__main__":
    main()
