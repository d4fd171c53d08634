"""Snapshots shared through an S3 bucket: the publisher uploads, API replicas download.

Layout under ``s3://BUCKET/PREFIX/``: every snapshot file under its own, never rewritten key
(``snapshot-<version>.duckdb``, the name it has on disk), its SHA-256 beside it
(``snapshot-<version>.duckdb.sha256``, as on disk), and ``CURRENT``, a small object holding the
current file's name. A publish uploads the file and its checksum first (a multipart upload
appears only once complete) and writes ``CURRENT`` after them, so a reader never finds a
pointer to a missing or partial file. A replica checks every download against its checksum
(and, as it loads it, its definitions: ``ductwork.snapshots.guard``). A publish that changed
nothing rewrites ``CURRENT`` only; its modification time then says when a sync last
confirmed the snapshot.

Retention is the data folder's: the newest three are kept, and an older one only goes once it
was replaced more than ``GRACE_S`` ago. The publisher cannot know how often each replica
polls, so the poll interval has a fixed upper bound (``MAX_POLL_S``, enforced by the setting)
and the grace covers it twice over: a replica that read ``CURRENT`` just before a publish still
finds the file it named, even if its download takes minutes.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Container, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from ductwork import file_modes, snapshots
from ductwork.erasure import local_files
from ductwork.settings import S3Settings
from ductwork.snapshots import guard, sync_times

MAX_POLL_S = 300.0
GRACE_S = 600.0  # the data folder's own grace, and at least twice MAX_POLL_S
KEEP = 3
FETCH_LOCK = ".fetch.lock"
log = logging.getLogger("ductwork")
# Multipart above 64 MiB, in parts of 64 MiB; boto3's managed transfer does the rest (its own
# number of parts in flight).
TRANSFER = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)
_MISSING = {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}  # nothing published yet


@dataclass(frozen=True)
class StoreLocation:
    """A bucket and a key prefix (empty, or ending in ``/``)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> StoreLocation:
        """``s3://BUCKET`` or ``s3://BUCKET/PREFIX``; ValueError for anything else."""
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"not an s3://BUCKET/PREFIX URL: {url!r}")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/" if prefix else "")

    def key(self, name: str) -> str:
        """The object key of a file name under the prefix."""
        return f"{self.prefix}{name}"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class Pointer:
    """What ``CURRENT`` names, and when it was last written (epoch seconds)."""

    name: str
    written_at: float

    @property
    def version(self) -> str:
        """The snapshot version in the file name."""
        return snapshots.version_of(self.name)


@dataclass(frozen=True)
class StorePublication:
    """The outcome of a publish to the store."""

    key: str
    uploaded: bool
    pruned: list[str]


def is_snapshot_name(name: str) -> bool:
    """Whether ``name`` is a snapshot file name (and nothing that could leave a folder)."""
    return (
        name.startswith(snapshots.PREFIX)
        and name.endswith(snapshots.SUFFIX)
        and len(name) > len(snapshots.PREFIX) + len(snapshots.SUFFIX)
        and "/" not in name
        and "\\" not in name
        and ".." not in name
    )


class SnapshotStore:
    """The snapshots under one ``s3://BUCKET/PREFIX``."""

    def __init__(self, location: StoreLocation, client: Any, region: str = "us-east-1") -> None:
        self.location = location
        self._client = client
        self._region = region

    @classmethod
    def connect(cls, url: str, s3: S3Settings) -> SnapshotStore:
        """A store at ``url`` through the endpoint and region of ``s3`` (credentials from the
        usual ``AWS_*`` variables)."""
        config = Config(
            connect_timeout=5,
            read_timeout=60,
            retries={"max_attempts": 5, "mode": "standard"},
        )
        client = boto3.session.Session().client(
            "s3", endpoint_url=s3.s3_endpoint_url, region_name=s3.s3_region, config=config
        )
        return cls(StoreLocation.parse(url), client, s3.s3_region)

    def publish(
        self, snapshot: snapshots.Snapshot, synced: bytes | None = None
    ) -> StorePublication:
        """Make ``snapshot`` current in the store: upload its file unless the store already has
        it (a confirm-only publish), write the streams' sync times (``synced``, see
        ``ductwork.snapshots.sync_times``) when given, then rewrite ``CURRENT``, then prune."""
        key = self.location.key(snapshot.path.name)
        checksum_key = key + guard.CHECKSUM_SUFFIX
        uploaded = False
        if not self._exists(key):
            self._with_bucket(lambda: self._upload(snapshot.path, key))
            uploaded = True
        if uploaded or not self._exists(checksum_key):
            checksum = guard.checksum_path(snapshot.path).read_bytes()
            self._with_bucket(lambda: self._put_text(checksum_key, checksum))
        if synced is not None:
            self._with_bucket(lambda: self._put_text(self.location.key(sync_times.SYNCED), synced))
        self._with_bucket(lambda: self._write_pointer(snapshot.path.name))
        return StorePublication(key, uploaded, self.prune())

    def read_sync_times(self) -> bytes | None:
        """The streams' sync times the last publish wrote; None when it wrote none."""
        found = self._get(sync_times.SYNCED)
        if found is None:
            return None
        return found["Body"].read(sync_times.MAX_BYTES + 1)  # more: refused by ``decode``

    def read_pointer(self) -> Pointer | None:
        """The current snapshot's name and when it was last published or confirmed; None
        before the first publish. ValueError if ``CURRENT`` names no snapshot file."""
        found = self._get(snapshots.POINTER)
        if found is None:
            return None
        name = found["Body"].read().decode("utf-8").strip()
        if not is_snapshot_name(name):
            raise ValueError(f"{self.location}{snapshots.POINTER} names no snapshot: {name!r}")
        return Pointer(name, found["LastModified"].timestamp())

    def read_checksum(self, name: str) -> str:
        """The checksum its publisher wrote beside the snapshot file ``name`` (hex);
        SnapshotRefused when there is none."""
        found = self._get(name + guard.CHECKSUM_SUFFIX)
        if found is None:
            raise guard.SnapshotRefused(name, "no checksum beside it")
        text = found["Body"].read(256).decode("ascii", "replace").strip()
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            raise guard.SnapshotRefused(name, "its checksum is not a SHA-256")
        return text

    def _get(self, name: str) -> dict[str, Any] | None:
        """The object ``name`` under the prefix (its ``Body`` unread); None when absent."""
        try:
            return self._client.get_object(Bucket=self.location.bucket, Key=self.location.key(name))
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise

    def download(self, name: str, target: Path) -> None:
        """Copy the snapshot file ``name`` into ``target``."""
        self._client.download_file(
            self.location.bucket, self.location.key(name), str(target), Config=TRANSFER
        )

    def prune(self, keep: int = KEEP, grace_s: float = GRACE_S) -> list[str]:
        """Delete snapshot files beyond the newest ``keep`` that were replaced more than
        ``grace_s`` ago, never the current one; returns the deleted keys."""
        pointer = self.read_pointer()
        files = sorted(self._snapshot_objects(), key=lambda item: item[0], reverse=True)
        current = self.location.key(pointer.name) if pointer is not None else None
        now = datetime.now(UTC)
        removed = []
        for index in range(max(keep, 1), len(files)):
            key = files[index][0]
            replaced_at = files[index - 1][1]
            if key != current and (now - replaced_at).total_seconds() > grace_s:
                self._client.delete_object(Bucket=self.location.bucket, Key=key)
                self._client.delete_object(
                    Bucket=self.location.bucket, Key=key + guard.CHECKSUM_SUFFIX
                )
                removed.append(key)
        return removed

    def snapshot_names(self) -> set[str]:
        """The names of every snapshot file the store holds."""
        prefix = len(self.location.prefix)
        return {key[prefix:] for key, _ in self._snapshot_objects()}

    def delete_snapshot(self, name: str) -> int:
        """Delete the snapshot file ``name`` and its checksum (never the current one: a
        ValueError); how many objects went."""
        pointer = self.read_pointer()
        if pointer is not None and pointer.name == name:
            raise ValueError("the store's current snapshot is not deleted")
        deleted = 0
        for key in (
            self.location.key(name),
            self.location.key(name) + guard.CHECKSUM_SUFFIX,
        ):
            if self._exists(key):
                self._client.delete_object(Bucket=self.location.bucket, Key=key)
                deleted += 1
        return deleted

    def read_erasure_marker(self) -> str | None:
        """The token of the last erasure marked in the store (``ductwork.erasure.local_files``);
        None when none was."""
        found = self._get(local_files.MARKER)
        if found is None:
            return None
        return found["Body"].read(256).decode("ascii", "replace").strip()

    def write_erasure_marker(self, token: str) -> None:
        """Mark an erasure in the store: its replicas then drop every local file the store no
        longer names."""
        self._with_bucket(
            lambda: self._put_text(self.location.key(local_files.MARKER), token.encode("ascii"))
        )

    def _snapshot_objects(self) -> Iterator[tuple[str, datetime]]:
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.location.bucket, Prefix=self.location.key(snapshots.PREFIX)
        )
        for page in pages:
            for item in page.get("Contents", []):
                name = item["Key"][len(self.location.prefix) :]
                if is_snapshot_name(name):
                    yield item["Key"], item["LastModified"]

    def _exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self.location.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return False
            raise
        return True

    def _upload(self, path: Path, key: str) -> None:
        self._client.upload_file(
            str(path),
            self.location.bucket,
            key,
            ExtraArgs={"ContentType": "application/vnd.duckdb"},
            Config=TRANSFER,
        )

    def _write_pointer(self, name: str) -> None:
        self._put_text(self.location.key(snapshots.POINTER), name.encode("utf-8"))

    def _put_text(self, key: str, body: bytes) -> None:
        self._client.put_object(
            Bucket=self.location.bucket,
            Key=key,
            Body=body,
            ContentType="text/plain; charset=utf-8",
            CacheControl="no-cache",
        )

    def _with_bucket(self, write: Any) -> None:
        """Run ``write``; should the bucket not exist yet, create it and write again."""
        try:
            write()
        except (ClientError, S3UploadFailedError) as exc:
            # boto3's managed upload wraps the client's error in its own: look at the text.
            if "NoSuchBucket" not in str(exc):
                raise
            self._create_bucket()
            write()

    def _create_bucket(self) -> None:
        options: dict[str, Any] = {"Bucket": self.location.bucket}
        if self._region != "us-east-1":
            options["CreateBucketConfiguration"] = {"LocationConstraint": self._region}
        try:
            self._client.create_bucket(**options)
        except ClientError as exc:
            if _code(exc) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def fetch_current(
    store: SnapshotStore, snapshots_dir: Path, refused: Container[str] = ()
) -> snapshots.Snapshot | None:
    """Bring the store's current snapshot into the local folder and make it current there.

    The workers of one replica share the folder: the first to see a new version downloads it
    while holding the folder's fetch lock, and the others then find the file in place. The
    local pointer's modification time follows the store's, so the snapshot's age reads the
    same on every replica. None while the store has no snapshot yet. A download that does not
    match its checksum raises SnapshotRefused; a name in ``refused`` (one refused before) is
    not downloaded again, and the local folder stays as it is.
    """
    pointer = store.read_pointer()
    if pointer is None:
        return None
    if pointer.name in refused:
        return snapshots.current(snapshots_dir)
    file_modes.current().make_private_dir(snapshots_dir)
    local = snapshots.current(snapshots_dir)
    if local is None or local.path.name != pointer.name:
        with _fetching(snapshots_dir):
            local = snapshots.current(snapshots_dir)
            if local is None or local.path.name != pointer.name:
                snapshots.adopt(
                    snapshots_dir,
                    pointer.name,
                    lambda staging: store.download(pointer.name, staging),
                    pointer.written_at,
                    store.read_checksum(pointer.name),
                )
            snapshots.prune(snapshots_dir, keep=KEEP, grace_s=GRACE_S)
    _follow_erasures(store, snapshots_dir)
    snapshots.confirm(snapshots_dir, pointer.written_at)
    _copy_sync_times(store, snapshots_dir)
    return snapshots.current(snapshots_dir)


def _follow_erasures(store: SnapshotStore, snapshots_dir: Path) -> None:
    """After an erasure marked in the store: drop every local snapshot file the store no longer
    names, and every rebuilt one, then copy the store's marker (which the workers watch)."""
    token = store.read_erasure_marker()
    if token is None or token == local_files.read_marker(snapshots_dir):
        return
    with _fetching(snapshots_dir):
        named = store.snapshot_names()
        dropped = local_files.drop_unnamed(snapshots_dir, named)
        local = snapshots.current(snapshots_dir)
        # A local current snapshot the store no longer names (fetched just before the
        # erasure's publish) is replaced at the next poll: the marker is copied then.
        if local is None or local.path.name in named:
            local_files.write_marker(snapshots_dir, token)
    log.info("an erasure in the store: %d local snapshot files dropped", dropped)


def _copy_sync_times(store: SnapshotStore, snapshots_dir: Path) -> None:
    """Bring the store's stream sync times here when they differ from the local copy (one small
    read per poll: a publish rewrites them even when it only confirmed the snapshot). A file
    that is not theirs is logged and left out; the last good copy stays."""
    raw = store.read_sync_times()
    if raw is None:
        return
    with suppress(FileNotFoundError):
        if (snapshots_dir / sync_times.SYNCED).read_bytes() == raw:
            return
    try:
        sync_times.write(snapshots_dir, sync_times.decode(raw))
    except ValueError as exc:
        log.warning("%s%s: %s", store.location, sync_times.SYNCED, exc)


@contextmanager
def _fetching(snapshots_dir: Path) -> Iterator[None]:
    """An exclusive lock on the folder's fetch lock file: one download at a time per host."""
    mode = file_modes.current().file_mode
    fd = os.open(snapshots_dir / FETCH_LOCK, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops its lock
