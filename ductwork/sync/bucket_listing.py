"""Streams that list a prefix of the object store's bucket (with boto3), not the upstream.

Objects whose ETag and LastModified are as stored keep their stored content type; only new or
changed objects are asked for theirs (HEAD). A listing item for item the one stored is not
written again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ductwork.contract.encoding import dumps
from ductwork.streams.model import Step
from ductwork.sync.context import StepResult, SyncContext
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Replacement, replace_rows
from warehouse_sql import stream_section

# The listing item of an object: (key, url, size, last modified, etag, content type) -> item.
Item = Callable[[str, str, int, datetime, str, str | None], dict[str, Any]]


@dataclass(frozen=True)
class BucketListing:
    """The reader of such a stream: the prefix listed, how an object becomes the item served,
    and the stream's SQL file (section ``stored``)."""

    prefix: str
    item: Item
    sql: str
    columns: Columns
    options: frozenset[str] = frozenset()
    resumable: bool = False
    guards: frozenset[str] = frozenset()

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Mirror the listing of each step."""
        for step in steps:
            yield self._sync_one(step, context)

    def _sync_one(self, step: Step, context: SyncContext) -> StepResult:
        bucket, con = context.bucket, context.con
        if bucket is None:
            raise ValueError(f"{step.asset} lists the bucket, and the run has none")
        s3 = bucket.api_client()
        stored = con.execute(stream_section(self.sql, "stored")).fetchall()
        known = {key: (etag, modified, kind) for key, etag, modified, kind, _ in stored}
        listed: list[dict[str, Any]] = []
        heads = 0
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket.bucket, Prefix=self.prefix
        )
        for page in pages:
            for obj in page.get("Contents") or []:
                key, etag = obj["Key"], obj["ETag"].strip('"')
                modified = obj["LastModified"].astimezone(UTC)
                previous = known.get(key)
                if previous is not None and previous[:2] == (etag, modified):
                    content_type = previous[2]
                else:
                    heads += 1
                    content_type = s3.head_object(Bucket=bucket.bucket, Key=key).get("ContentType")
                url = bucket.object_url(key)
                item = self.item(key, url, obj["Size"], modified, etag, content_type)
                listed.append({
                    "key": key, "size_bytes": obj["Size"], "last_modified": modified,
                    "etag": etag, "content_type": content_type, "url": url,
                    "record": dumps(item).decode(), "synced_at": datetime.now(UTC),
                })  # fmt: skip
        # A listing item for item the one stored is not written again.
        unchanged = {row["key"]: row["record"] for row in listed} == {
            key: record for key, *_, record in stored
        }
        if not unchanged:
            replace_rows(con, Replacement(step.table, self.columns.table(listed)))
        return StepResult(
            step.asset,
            len(listed),
            0 if unchanged else len(listed),
            {"head_requests": heads, "unchanged": unchanged},
        )
