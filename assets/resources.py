"""Dagster resources: one per external system (upstream API, warehouse, data folder)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import Field, PrivateAttr

from assets.warehouse_admission import hold_warehouse, note_stop_signal
from ductwork import file_modes
from ductwork.contract.encoding import object_url
from ductwork.heap import keep_heap_compact
from ductwork.settings import HomeSettings, ImageSettings, S3Settings, UpstreamTuning, load
from ductwork.upstream.client import RetryRules, UpstreamClient
from ductwork.upstream.image_policy import ImagePolicy
from ductwork.warehouse.opening import prepare_connection

_TUNING = UpstreamTuning.model_fields
# Attempts of one S3 request, the first included (dagster-aws's default).
S3_MAX_ATTEMPTS = 5


class UpstreamResource(dg.ConfigurableResource):
    """The upstream HVAC service. The API key comes from DUCTWORK_UPSTREAM_API_KEY."""

    base_url: str = Field(description="Base URL of the upstream service.")
    api_key: str = Field(description="Bearer key; never logged or shown in metadata.")
    # The defaults are the settings' own (one home for each default).
    concurrency: int = Field(
        default=_TUNING["upstream_concurrency"].default, description="Requests in flight at most."
    )
    timeout_s: float = Field(
        default=_TUNING["upstream_timeout_s"].default, description="Per-request timeout, seconds."
    )
    max_retries: int = Field(
        default=_TUNING["upstream_max_retries"].default,
        description="Retries of one request on 5xx or drops.",
    )
    max_body_bytes: int = Field(
        default=_TUNING["upstream_max_body_bytes"].default,
        description="Largest answer body, bytes, after decompression.",
    )

    def client(self) -> UpstreamClient:
        """A new client; open it with ``async with`` inside one event loop."""
        return UpstreamClient(
            self.base_url,
            self.api_key,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            rules=RetryRules(max_retries=self.max_retries),
            max_body_bytes=self.max_body_bytes,
        )


class Warehouse(DuckDBResource):
    """The working warehouse: dagster-duckdb's resource, held by one run at a time.

    In a run, setting it up takes the warehouse's lease first (waiting while another run holds
    it, see ``assets.warehouse_admission``), then holds the database open for the length of
    the run: every step opens and closes its own connection, and with no other connection to
    the file open in the process each open would start a DuckDB instance afresh and each close
    after a write would checkpoint. Outside a run (no setup), it is the plain resource.
    """

    _held: ExitStack | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # Set up in every run's process, whichever started it, before the steps allocate.
        keep_heap_compact()
        # DuckDB creates the file but not its folder. The folder (the data folder) is brought
        # to the file-mode rule as every run starts, so that a folder left readable is
        # tightened wherever runs start, the daemon's included.
        modes = file_modes.current()
        file_modes.tighten_home(modes.make_private_dir(Path(self.database).parent), modes)
        held = ExitStack()
        run = context.run
        if context.instance is not None and run is not None:
            lease = hold_warehouse(context.instance, run.run_id, Path(self.database), context.log)
            held.callback(lease.release)
            # Runs before the run's end is recorded: a signal that interrupted the run makes
            # it end as canceled.
            held.callback(note_stop_signal, context.instance, run.run_id)
        try:
            held.enter_context(self.get_connection())
        except BaseException:
            held.close()
            raise
        self._held = held

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None


class DataHome(dg.ConfigurableResource):
    """The data folder: where snapshots are published."""

    path: str = Field(description="DUCTWORK_HOME, absolute.")

    @property
    def snapshots_dir(self) -> Path:
        """Published snapshots."""
        return HomeSettings(home=Path(self.path)).snapshots_dir


def resources_for_home(
    home: Path,
    upstream_url: str | dg.EnvVar,
    api_key: str | dg.EnvVar,
    s3: S3Settings,
    tuning: UpstreamTuning | None = None,
    images: ImageSettings | None = None,
) -> dict[str, object]:
    """Every resource a run takes: the upstream, the warehouse and snapshots under ``home``,
    the bucket and the image hosts. The code location passes its environment's values (secrets as
    ``dg.EnvVar``); tests and benchmarks pass their own upstream and bucket."""
    tuning = tuning or UpstreamTuning()
    settings = HomeSettings(home=home)
    return {
        "upstream": UpstreamResource(
            base_url=upstream_url,
            api_key=api_key,
            concurrency=tuning.upstream_concurrency,
            timeout_s=tuning.upstream_timeout_s,
            max_retries=tuning.upstream_max_retries,
            max_body_bytes=tuning.upstream_max_body_bytes,
        ),
        "warehouse": Warehouse(database=str(settings.warehouse_path)),
        "data_home": DataHome(path=str(settings.home)),
        "object_store": ObjectStore(
            bucket=s3.s3_bucket, endpoint_url=s3.s3_endpoint_url, region_name=s3.s3_region
        ),
        "image_sources": ImageSources.of(images or ImageSettings()),
    }


def default_resources() -> dict[str, object]:
    """Resources for the deployed code location, read from the environment.

    Also sets the process's file-creation mask (``DUCTWORK_FILE_GROUP``): the code servers
    and the run processes they start write the data folder, DuckDB's and SQLite's files
    included, however the Dagster processes that load this code location were started.
    """
    file_modes.current().apply_umask()
    return resources_for_home(
        load(HomeSettings).home,
        dg.EnvVar("DUCTWORK_UPSTREAM_URL"),
        dg.EnvVar("DUCTWORK_UPSTREAM_API_KEY"),
        load(S3Settings),
        load(UpstreamTuning),
        load(ImageSettings),
    )


class ImageSources(dg.ConfigurableResource):
    """The hosts product images are downloaded from (``DUCTWORK_IMAGE_*``)."""

    hosts: str | None = Field(
        default=None, description="DUCTWORK_IMAGE_HOSTS; unset: the upstream's own host."
    )
    max_bytes: int = Field(
        default=ImageSettings.model_fields["image_max_bytes"].default,
        description="DUCTWORK_IMAGE_MAX_BYTES.",
    )

    @classmethod
    def of(cls, settings: ImageSettings) -> ImageSources:
        """The resource for these settings."""
        return cls(hosts=settings.image_hosts, max_bytes=settings.image_max_bytes)

    def policy(self, upstream_url: str) -> ImagePolicy:
        """The download policy for images of the upstream at ``upstream_url``."""
        return ImagePolicy.for_upstream(upstream_url, self.hosts, self.max_bytes)


class ObjectStore(dg.ConfigurableResource):
    """The S3-compatible bucket a stream lists and images are mirrored to (credentials: AWS_*
    variables)."""

    bucket: str = Field(description="Bucket name (DUCTWORK_S3_BUCKET).")
    endpoint_url: str | None = Field(default=None, description="DUCTWORK_S3_ENDPOINT_URL.")
    region_name: str = Field(
        default=S3Settings.model_fields["s3_region"].default, description="DUCTWORK_S3_REGION."
    )

    def api_client(self) -> Any:
        """A botocore S3 client for the API's own operations (list, head, put), built when a
        step asks for it and gone with the step: S3's service model weighs some 15 MiB in a
        client, which a run's larger steps after the bucket's need not carry (built as the
        run began, in a thread, the medium full sync peaked 15 MiB higher and a run with
        nothing new took no less time)."""
        return self._new_api_client()

    def client(self) -> Any:
        """A boto3 S3 client: the API's operations plus boto3's managed transfers
        (``upload_file``)."""
        import boto3

        return boto3.session.Session().client("s3", **self._client_options())

    def _new_api_client(self) -> Any:
        # botocore alone, without boto3: importing boto3 (and its transfer manager) and its
        # client's extra handlers is a noticeable part of a run with nothing to sync, and the
        # assets use the API's operations only.
        import botocore.session

        return botocore.session.get_session().create_client("s3", **self._client_options())

    def _client_options(self) -> dict[str, Any]:
        # As dagster-aws's S3Resource configures its client (standard retries, five attempts);
        # importing dagster-aws pulls in its every integration.
        from botocore.config import Config

        return {
            "region_name": self.region_name,
            "endpoint_url": self.endpoint_url,
            "config": Config(retries={"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"}),
        }

    def object_url(self, key: str) -> str:
        """The path-style URL of an object: ``<endpoint>/<bucket>/<key>``, key percent-encoded."""
        base = self.endpoint_url or f"https://s3.{self.region_name}.amazonaws.com"
        return object_url(base, self.bucket, key)


@contextmanager
def open_warehouse(
    resource: DuckDBResource, parallel: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to the warehouse with every table of the schema in place, on
    one DuckDB thread unless ``parallel`` (see ``prepare_connection``)."""
    # DuckDB creates the file but not its folder; without the folder DuckDBResource would
    # retry the connection for minutes instead of failing.
    Path(resource.database).parent.mkdir(parents=True, exist_ok=True)
    with resource.get_connection() as con:
        # DuckDBResource closes its connection only when the block ends without an error;
        # a failed asset must not leave the warehouse file open in this process.
        try:
            prepare_connection(con, parallel)
            yield con
        finally:
            con.close()
