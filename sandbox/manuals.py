"""The internal digital-assets listing: objects under ``manuals/`` in the object store."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config

from ductwork.contract.encoding import dumps, object_url
from ductwork.streams.internal import MANUALS_PREFIX, manual_item

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def s3_client(endpoint_url: str) -> Any:
    """A path-style S3 client for ``endpoint_url`` (one per endpoint, reused)."""
    with _clients_lock:
        client = _clients.get(endpoint_url)
        if client is None:
            session = boto3.session.Session()
            credentials: dict[str, str] = {}
            if session.get_credentials() is None:  # an emulator accepts any signature
                credentials = {"aws_access_key_id": "sandbox", "aws_secret_access_key": "sandbox"}
            client = session.client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=session.region_name or "us-east-1",
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
                **credentials,
            )
            _clients[endpoint_url] = client
        return client


def list_manuals(endpoint_url: str | None, bucket: str | None) -> bytes:
    """The success body: every ``manuals/`` object in key order, or none without a store."""
    items: list[dict[str, Any]] = []
    if endpoint_url and bucket:
        s3 = s3_client(endpoint_url)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=MANUALS_PREFIX)
        for page in pages:
            for obj in page.get("Contents") or []:
                key = obj["Key"]
                content_type = s3.head_object(Bucket=bucket, Key=key).get("ContentType")
                url = object_url(endpoint_url, bucket, key)
                items.append(
                    manual_item(
                        key, url, obj["Size"], obj["LastModified"], obj["ETag"], content_type
                    )
                )
    return dumps({"success": True, "data": items})
