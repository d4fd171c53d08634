"""pim-image-sync: the upstream's image job, then every product image copied into the bucket.

Image URLs come from upstream records, so downloads go through the guard in
``ductwork.upstream.image_fetch`` (allowed hosts, public addresses, same-host redirects,
image content types, a size cap). One image that cannot be downloaded or uploaded is recorded
and counted; the others still land.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from assets.ingest import fetch, ingest_asset, run_metadata
from assets.resources import ImageSources, ObjectStore, UpstreamResource, open_warehouse
from ductwork.contract.paths import PIM_IMAGE_SYNC
from ductwork.streams.model import NIGHTLY, Table
from ductwork.streams.registry import PRODUCTS
from ductwork.upstream.client import UpstreamClient
from ductwork.upstream.image_policy import ImageRefused, image_key
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Replacement, replace_rows
from warehouse_sql import section

if TYPE_CHECKING:  # the job imports it when it runs: every sync loads this module
    from ductwork.upstream.image_fetch import ImageFetcher

GROUP = "internal"
IMAGES = Table("product_images", ("source_url",))


@dataclass(frozen=True)
class ImageJob:
    """The image sync's job and schedule: not a stream, a job of its own."""

    asset: str = "product_images"
    job: str = "pim_image_sync"
    schedule: str = "pim_image_sync_nightly"
    cron: str = "0 4 * * *"
    description: str = (
        "Start the upstream's image sync, then mirror product images into the bucket."
    )


IMAGE_JOB = ImageJob()
IMAGE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=NIGHTLY.fail_after, warn_window=NIGHTLY.warn_after
)
IMAGE_SCHEMA = Columns(
    ("source_url", "string"), ("sku", "string"), ("kind", "string"),
    ("object_key", "string"), ("md5", "string"), ("size_bytes", "int64"),
    ("status", "string"), ("error", "string"), ("synced_at", "timestamp")
)  # fmt: skip
# The status of an image that did not land is "failed"; its error says at which stage.
LANDED = ("uploaded", "unchanged")
FAILURES = ("refused", "download_failed", "upload_failed")
ERROR_SAMPLES = 5
# An http(s) URL's query and fragment: from its first "?" or "#" to the URL's end (whitespace,
# a quote or an angle bracket, as URLs are set in messages).
_URL_TAIL = re.compile(r"""(https?://[^\s?#'"<>]*)[?#][^\s'"<>]*""", re.IGNORECASE)


@dataclass(frozen=True)
class Mirrored:
    """What the bucket holds for one image URL after an earlier run."""

    md5: str
    object_key: str


def without_url_queries(text: str) -> str:
    """``text`` with the query and fragment cut from every http(s) URL in it: a signed URL
    carries its signature and credentials there, and an HTTP client's or boto3's error may
    quote the URL whole."""
    return _URL_TAIL.sub(r"\1", text)


def _failed(row: dict[str, Any], stage: str, exc: BaseException) -> dict[str, Any]:
    """The row of an image that did not land, its error naming the stage and the reason (any
    URL in it without its query)."""
    error = f"{stage}: {without_url_queries(str(exc))}"[:300]
    return {**row, "status": "failed", "stage": stage, "error": error}


async def mirror_images(
    fetcher: ImageFetcher,
    s3: Any,
    bucket: str,
    images: list[tuple[str, str, str | None]],
    known: dict[str, Mirrored],
    at_once: int,
) -> list[dict[str, Any]]:
    """Download every (sku, url, kind) image and upload those whose content changed to
    ``bucket`` with the boto3 client ``s3``; one row per image, whatever happened to it.

    At most ``at_once`` images are between the start of their download and the end of their
    upload, so at most that many bodies (each under the size cap) are in memory.
    """
    slots = asyncio.Semaphore(at_once)

    async def one(sku: str, url: str, kind: str | None) -> dict[str, Any]:
        key = image_key(sku, url)
        row: dict[str, Any] = {
            "source_url": url, "sku": sku, "kind": kind, "object_key": key,
            "md5": None, "size_bytes": None, "error": None, "synced_at": datetime.now(UTC),
        }  # fmt: skip
        async with slots:
            try:
                image = await fetcher.fetch(url)
            except ImageRefused as exc:
                return _failed(row, "refused", exc)
            except Exception as exc:  # one bad image must not stop the others
                return _failed(row, "download_failed", exc)
            digest = hashlib.md5(image.body, usedforsecurity=False).hexdigest()
            row.update(md5=digest, size_bytes=len(image.body))
            if known.get(url) == Mirrored(digest, key):
                return {**row, "status": "unchanged"}
            try:
                await asyncio.to_thread(
                    s3.put_object,
                    Bucket=bucket,
                    Key=key,
                    Body=image.body,
                    ContentType=image.content_type,
                )
            except Exception as exc:  # nor must one failed upload
                return _failed(row, "upload_failed", exc)
            return {**row, "status": "uploaded"}

    return list(await asyncio.gather(*(one(*image) for image in images)))


def _without_query(url: str) -> str:
    """``url`` up to its query or fragment, whatever its scheme (and even when unparsable)."""
    return re.split(r"[?#]", url, maxsplit=1)[0]


def image_metadata(rows: list[dict[str, Any]]) -> dict[str, int | str]:
    """Counts per status, and the first few reasons images did not land."""
    counts = Counter(row.get("stage", row["status"]) for row in rows)
    # Without the query: a signed image URL's token stays out of the metadata.
    problems = [
        f"{_without_query(row['source_url'])}: {row['error']}" for row in rows if row["error"]
    ]
    return {
        **{name: counts[name] for name in (*LANDED, *FAILURES)},
        "failed": sum(counts[stage] for stage in FAILURES),
        "bytes_downloaded": sum(row["size_bytes"] or 0 for row in rows),
        "first_errors": "\n".join(problems[:ERROR_SAMPLES]),
    }


@ingest_asset(
    group=GROUP,
    kinds={"api", "s3", "duckdb"},
    deps=[step.asset for step in PRODUCTS.steps if step.table.name == "units"],
    description=(
        "pim-image-sync: starts the upstream's job (waiting out its 429 cooldown), then copies "
        "every product image into the bucket as images/<percent-encoded sku>/<sha256 of the "
        "URL><extension>, skipping unchanged content. Downloads only from DUCTWORK_IMAGE_HOSTS "
        "(public addresses unless listed), image types only, at most DUCTWORK_IMAGE_MAX_BYTES; "
        "an image that fails is recorded and counted, the others still land."
    ),
)
def product_images(
    context: dg.AssetExecutionContext,
    upstream: UpstreamResource,
    object_store: ObjectStore,
    image_sources: ImageSources,
    warehouse: DuckDBResource,
) -> dg.MaterializeResult:
    """Run the image sync and record what happened to each image in ``product_images``."""
    policy = image_sources.policy(upstream.base_url)
    s3 = object_store.api_client()
    with open_warehouse(warehouse) as con:
        images = con.execute(section("product_images", "sources")).fetchall()
        known = {
            url: Mirrored(md5, key)
            for url, md5, key in con.execute(section("product_images", "mirrored")).fetchall()
        }
        context.log.info("mirroring %d product images", len(images))

        from ductwork.upstream.image_fetch import ImageFetcher  # aiohttp: only this job needs it

        async def run(client: UpstreamClient) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            job = await client.get_json(PIM_IMAGE_SYNC)
            async with ImageFetcher(
                policy, concurrency=upstream.concurrency, timeout_s=upstream.timeout_s
            ) as fetcher:
                rows = await mirror_images(
                    fetcher, s3, object_store.bucket, images, known, client.concurrency
                )
            return job, rows

        fetched = fetch(upstream, run)
        job, rows = fetched.value
        table = IMAGE_SCHEMA.table(rows)
        replace_rows(con, Replacement(IMAGES, table))
    summary = image_metadata(rows)
    if summary["failed"]:
        context.log.warning("%d of %d product images did not land", summary["failed"], len(rows))
    return dg.MaterializeResult(
        metadata=run_metadata(
            fetched, len(rows), **summary, upstream_job_id=str(job.get("jobId", ""))
        )
    )
