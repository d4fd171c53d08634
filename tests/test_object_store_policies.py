"""The example object-store policies in deploy/object-store/, enforced: moto's S3 server checks
every request against the IAM policy of the keys that signed it. The sync's keys publish and
prune snapshots and write images and the steps' logs; the read API's keys download snapshots
and write nothing anywhere; the webserver's keys read the steps' logs only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import duckdb
import httpx
import pytest
from botocore.exceptions import ClientError

from ductwork import snapshots
from ductwork.snapshots import guard
from ductwork.snapshots.store import SnapshotStore, StoreLocation
from sandbox.local_server import HOST, free_socket
from tests.helpers.deployment import config, helm_values, policy_of

START_LIMIT_S = 30.0


@dataclass(frozen=True)
class Identity:
    """Object-store keys under one policy."""

    key_id: str
    secret: str

    def client(self, endpoint: str) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )


@dataclass(frozen=True)
class EnforcingStore:
    """moto's S3 server checking IAM policies, with one identity per example policy."""

    endpoint: str
    sync: Identity
    api: Identity
    webserver: Identity


def identity(iam: Any, name: str, policy: dict[str, Any]) -> Identity:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    made = iam.create_access_key(UserName=name)["AccessKey"]
    return Identity(made["AccessKeyId"], made["SecretAccessKey"])


@pytest.fixture(scope="module")
def enforcing_store() -> Iterator[EnforcingStore]:
    """A moto server of its own (IAM checks are a process-wide switch in moto), set up without
    checks, then switched to check every request."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    endpoint = f"http://{HOST}:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            assert server.poll() is None, "moto's server exited"
            try:
                httpx.get(f"{endpoint}/moto-api/", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "moto's server did not start"
                time.sleep(0.1)
        setup = Identity("setup", "setup")
        iam = boto3.session.Session().client(
            "iam", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id=setup.key_id, aws_secret_access_key=setup.secret,
        )  # fmt: skip
        s3 = setup.client(endpoint)
        for bucket in buckets():
            s3.create_bucket(Bucket=bucket)
        store = EnforcingStore(
            endpoint,
            sync=identity(iam, "sync", policy_of("ductwork-sync-secrets") or {}),
            api=identity(iam, "api", policy_of("ductwork-api-secrets") or {}),
            webserver=identity(iam, "webserver", policy_of("dagster-compute-log-reader") or {}),
        )
        httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
        yield store
    finally:
        server.terminate()
        server.wait(timeout=30)


def buckets() -> list[str]:
    logs = helm_values()["computeLogManager"]["config"]["s3ComputeLogManager"]["bucket"]
    return [snapshot_location().bucket, config()["DUCTWORK_S3_BUCKET"], logs]


def snapshot_location() -> StoreLocation:
    return StoreLocation.parse(config()["DUCTWORK_SNAPSHOT_STORE"])


def log_prefix() -> str:
    return helm_values()["computeLogManager"]["config"]["s3ComputeLogManager"]["prefix"]


def a_snapshot(folder: Path) -> snapshots.Snapshot:
    version = snapshots.new_version()
    path = folder / f"{snapshots.PREFIX}{version}{snapshots.SUFFIX}"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE units AS SELECT 'SKU-1' AS sku")
    guard.write_checksum(path)  # as its publisher
    return snapshots.Snapshot(version, path)


def refused(call: Any, **arguments: Any) -> bool:
    """Whether the store refuses the call for want of permission."""
    try:
        call(**arguments)
    except ClientError as exc:
        return exc.response["Error"]["Code"] in {"AccessDenied", "403"}
    return False


def test_the_checks_are_on_unknown_keys_are_refused(enforcing_store: EnforcingStore) -> None:
    stranger = Identity("AKIAUNKNOWN000000000", "not-a-key").client(enforcing_store.endpoint)
    with pytest.raises(ClientError):
        stranger.list_objects_v2(Bucket=snapshot_location().bucket)


def test_the_sync_publishes_and_the_read_api_reads_but_writes_nothing(
    enforcing_store: EnforcingStore, tmp_path: Path
) -> None:
    location = snapshot_location()
    api = enforcing_store.api.client(enforcing_store.endpoint)
    sync = enforcing_store.sync.client(enforcing_store.endpoint)
    # Before the first publish a replica finds nothing. (AWS answers a missing key with 404,
    # not 403, only to keys that may list the bucket, which the policy grants; moto answers
    # 404 either way.)
    assert SnapshotStore(location, api).read_pointer() is None
    published = a_snapshot(tmp_path)
    outcome = SnapshotStore(location, sync).publish(published)
    assert outcome.uploaded
    pointer = SnapshotStore(location, api).read_pointer()
    assert pointer is not None and pointer.version == published.version
    copy = tmp_path / "downloaded.duckdb"
    SnapshotStore(location, api).download(pointer.name, copy)
    assert copy.read_bytes() == published.path.read_bytes()
    checksum = SnapshotStore(location, api).read_checksum(pointer.name)
    assert checksum == guard.checksum_of(published.path)
    # Nothing the read API's keys can write or delete, here or in the other buckets.
    media = config()["DUCTWORK_S3_BUCKET"]
    pointer_key = location.key(snapshots.POINTER)
    assert refused(api.put_object, Bucket=location.bucket, Key=pointer_key, Body=b"x")
    assert refused(api.delete_object, Bucket=location.bucket, Key=location.key(pointer.name))
    assert refused(api.put_object, Bucket=media, Key="images/x/y.png", Body=b"x")
    assert refused(api.list_objects_v2, Bucket=media)
    assert SnapshotStore(location, api).read_pointer() == pointer
    # The sync's keys write where the sync writes, and nowhere else in those buckets.
    sync.put_object(Bucket=media, Key="images/SKU-1/a.png", Body=b"png")
    sync.put_object(Bucket=buckets()[2], Key=f"{log_prefix()}/run/step.out", Body=b"log")
    assert refused(sync.put_object, Bucket=media, Key="manuals/a.pdf", Body=b"x")
    assert refused(sync.put_object, Bucket=location.bucket, Key="elsewhere/x", Body=b"x")


def test_the_webserver_reads_the_steps_logs_and_nothing_else(
    enforcing_store: EnforcingStore,
) -> None:
    logs_bucket = buckets()[2]
    key = f"{log_prefix()}/some-run/step.err"
    enforcing_store.sync.client(enforcing_store.endpoint).put_object(
        Bucket=logs_bucket, Key=key, Body=b"traceback"
    )
    webserver = enforcing_store.webserver.client(enforcing_store.endpoint)
    assert webserver.get_object(Bucket=logs_bucket, Key=key)["Body"].read() == b"traceback"
    assert refused(webserver.put_object, Bucket=logs_bucket, Key=key, Body=b"x")
    assert refused(webserver.delete_object, Bucket=logs_bucket, Key=key)
    location = snapshot_location()
    assert refused(webserver.list_objects_v2, Bucket=location.bucket)
    assert refused(
        webserver.get_object, Bucket=location.bucket, Key=location.key(snapshots.POINTER)
    )
