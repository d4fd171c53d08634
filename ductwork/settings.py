"""Settings from the environment (prefix ``DUCTWORK_``), grouped by the part that needs them.

Each group is loaded where it is used, so a command only asks for what it needs, and a missing
required setting is reported in one line that names the variable.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "DUCTWORK_"


class SettingsError(RuntimeError):
    """A setting is missing or malformed; the message names the environment variable."""


class _Base(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")


class HomeSettings(_Base):
    """Where ductwork keeps its data."""

    home: Path = Field(
        default=Path(".ductwork"),
        description="Data folder: warehouse DuckDB, snapshots, API keys and the Dagster home.",
    )
    api_keys_file: Path | None = Field(
        default=None,
        description="The read API's key file; unset means `$DUCTWORK_HOME/api-keys.json`.",
    )

    @field_validator("home")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("api_keys_file")
    @classmethod
    def _absolute_file(cls, value: Path | None) -> Path | None:
        # Not resolved: a mounted Kubernetes Secret is a symlink into a folder that is
        # replaced when the Secret changes; the key file is re-read through the link.
        return None if value is None else value.expanduser().absolute()

    @property
    def warehouse_path(self) -> Path:
        """The pipeline's working DuckDB file (only the pipeline opens it)."""
        return self.home / "warehouse.duckdb"

    @property
    def snapshots_dir(self) -> Path:
        """Published, immutable DuckDB snapshots that the read API and analysts open."""
        return self.home / "snapshots"

    @property
    def dagster_home(self) -> Path:
        """The Dagster instance folder (run and event storage)."""
        return self.home / "dagster"

    @property
    def notifications_dir(self) -> Path:
        """Change-notification subscriptions (with their signing secrets) and their locks."""
        return self.home / "notifications"

    @property
    def exports_registry(self) -> Path:
        """Every ``ductwork export`` written, one JSON line each (``ductwork.erasure.exports``)."""
        return self.home / "exports.jsonl"

    @property
    def keys_path(self) -> Path:
        """Hashes of the read API's keys (``DUCTWORK_API_KEYS_FILE``, or under the home)."""
        return self.api_keys_file or self.home / "api-keys.json"


class UpstreamSettings(_Base):
    """How to reach the upstream service (required by a sync)."""

    upstream_url: str = Field(description="Base URL of the upstream service (required for sync).")
    upstream_api_key: SecretStr = Field(
        description="Bearer API key for the upstream (required for sync; never logged)."
    )


class UpstreamTuning(_Base):
    """How hard a sync may press the upstream."""

    upstream_concurrency: int = Field(
        default=8, ge=1, le=64, description="Requests in flight to the upstream at most."
    )
    upstream_timeout_s: float = Field(
        default=30.0, gt=0, description="Per-request timeout, seconds."
    )
    upstream_max_retries: int = Field(
        default=6,
        ge=0,
        description="Retries of one request on 5xx or a lost connection (429 waits are separate).",
    )
    upstream_max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="Largest upstream answer body, bytes, counted after decompression as it "
        "arrives; a larger one fails the step.",
    )


class SyncSettings(_Base):
    """Defaults of the incremental streams (each also settable per run in the UI)."""

    lead_window_days: int = Field(
        default=30, ge=0, description="Days of recent leads re-read by every incremental run."
    )
    warehouse_memory_limit: str = Field(
        default="64MB",
        pattern=r"^[0-9]{1,6}(KB|MB|GB|KiB|MiB|GiB)$",
        description="DuckDB's memory limit for the sync; beyond it, DuckDB evicts or spills. "
        "A write (or a step's read of a whole table) that still runs out of memory is rolled "
        "back and retried under twice the limit, at most three times; the step goes on under "
        "the raised limit.",
    )


class HistorySettings(_Base):
    """What the mirror remembers of the versions it published."""

    history_days: int = Field(
        default=90,
        ge=1,
        description="Days of published versions kept for the changes feed and the past; older "
        "ones are dropped at publish, never the current one.",
    )
    history_days_leads: int | None = Field(
        default=None,
        ge=1,
        description="Days of the leads' versions kept (personal data), when shorter than "
        "`DUCTWORK_HISTORY_DAYS`; unset: the default. Applied at the next publish.",
    )
    history_days_contractors: int | None = Field(
        default=None,
        ge=1,
        description="Days of the contractors' versions kept (personal data), when shorter than "
        "`DUCTWORK_HISTORY_DAYS`; unset: the default. Applied at the next publish.",
    )

    def keep(self) -> timedelta:
        """How long every stream's published versions are kept, unless kept shorter."""
        return timedelta(days=self.history_days)

    def stream_keeps(self) -> dict[str, timedelta]:
        """The streams kept shorter than the default (personal data only), by stream name."""
        shorter = {"leads": self.history_days_leads, "contractors": self.history_days_contractors}
        return {
            stream: timedelta(days=days)
            for stream, days in shorter.items()
            if days is not None and days < self.history_days
        }


class RunSettings(_Base):
    """How runs share the warehouse and how the scheduler starts them."""

    warehouse_wait_s: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds a run waits for another run to release the warehouse before failing.",
    )
    schedules: str = Field(
        default="on",
        pattern=r"^(on|off)$",
        description="`off` leaves the schedules stopped; `on` runs them wherever the daemon runs.",
    )
    sensor_interval_s: int = Field(
        default=30,
        ge=1,
        description="Seconds between two evaluations of the daemon's sensors (failed-run alerts, "
        "notification retries).",
    )


class AlertSettings(_Base):
    """Where failed runs are reported."""

    # Secret: chat and pager webhooks carry their token in the URL.
    alert_webhook_url: SecretStr | None = Field(
        default=None, description="POSTed a short JSON message for every failed run (optional)."
    )


class NotificationSettings(_Base):
    """How change notifications reach their subscribers (``ductwork subscriptions``)."""

    webhook_timeout_s: float = Field(
        default=5.0,
        gt=0,
        # The sensor's delivery pass lasts four timeouts at most and must end within the minute
        # Dagster gives a sensor's evaluation.
        le=10,
        description="Seconds one change-notification delivery may take, from connecting to the "
        "answer's last header (at most 10); a publishing run's deliveries all end within this "
        "long, whatever its subscribers do.",
    )
    webhook_served_wait_s: float = Field(
        default=5.0,
        ge=0,
        le=30,
        description="Seconds a publishing run waits, before its notifications leave, for every "
        "local `ductwork serve` worker on the data folder to serve the publish (at most 30); "
        "then they leave anyway, with a warning naming the workers behind.",
    )
    webhook_backoff_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds before the first retry of a failed delivery; each further failure "
        "doubles it, up to an hour.",
    )
    webhook_give_up_s: float = Field(
        default=86400.0,
        ge=0,
        description="Seconds a subscriber may keep failing before its subscription is paused "
        "(`ductwork subscriptions replay` resumes it).",
    )


class FileSettings(_Base):
    """Who may read the data folder besides its owner."""

    file_group: str | None = Field(
        default=None,
        description="Group (name or gid) that may read the data folder: files 0640, folders "
        "2750; unset means files 0600, folders 0700.",
    )


class AnalystSettings(_Base):
    """What ``ductwork sql`` and ``ductwork export`` may take of the machine."""

    sql_temp_limit: str = Field(
        default="4GiB",
        pattern=r"^[0-9]{1,6}(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="Most DuckDB may spill to disk for one `ductwork sql` or `export`, in a "
        "private folder under the system's temporary folder; beyond it the query fails.",
    )
    sql_memory_limit: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,6}(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="DuckDB's memory limit for `ductwork sql` and `export` (beyond it, DuckDB "
        "spills); unset means DuckDB's own, 80 % of the memory.",
    )


class S3Settings(_Base):
    """The S3-compatible object store: its bucket is listed by a stream and holds the
    mirrored product images."""

    s3_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint; unset means AWS's default."
    )
    s3_bucket: str = Field(default="ductwork", description="The object store's bucket.")
    s3_region: str = Field(default="us-east-1", description="Region name given to boto3.")


class ImageSettings(_Base):
    """Where the image sync may download product images from, and how large they may be."""

    image_hosts: str | None = Field(
        default=None,
        description="Hosts images are downloaded from, comma-separated `host` or `host:port`; "
        "unset means the upstream's own host. Only listed hosts may resolve to private, "
        "loopback or link-local addresses.",
    )
    image_max_bytes: int = Field(
        default=10_485_760, ge=1, description="Largest image downloaded, bytes; larger is refused."
    )

    @field_validator("image_hosts")
    @classmethod
    def _hosts(cls, value: str | None) -> str | None:
        from ductwork.upstream.image_policy import parse_hosts

        if value is not None:
            parse_hosts(value)  # ValueError names the entry that is not host or host:port
        return value


class SnapshotStoreSettings(_Base):
    """Snapshots shared through an object store: the publisher uploads, replicas download."""

    snapshot_store: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$",
        description="`s3://BUCKET/PREFIX`: publish snapshots there, and serve from there.",
    )
    snapshot_poll_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="Seconds between a replica's checks for a new snapshot (at most 300).",
    )


class ServeSettings(_Base):
    """The read API."""

    serve_host: str = Field(default="127.0.0.1", description="Address the read API binds.")
    serve_port: int = Field(default=8080, description="Port the read API binds.")
    serve_workers: int = Field(default=2, ge=1, description="uvicorn worker processes.")
    serve_keyless_requests_per_second: int = Field(
        default=5,
        ge=1,
        description="Calls per client address (IPv6: per /64) per second to the paths served "
        "without a key.",
    )
    serve_key_requests_per_second: int = Field(
        default=1000,
        ge=1,
        description="Units per API key per second: a call, or a page per hundred records it "
        "asks for (per process unless counted in Redis).",
    )
    serve_failed_requests_per_second: int = Field(
        default=10,
        ge=1,
        description="401 answers, and 404s to requests without a valid key, per client address "
        "(IPv6: per /64) per second; beyond it, 429 to every request from that address.",
    )
    rate_limit_url: str | None = Field(
        default=None,
        pattern=r"^rediss?://",
        description="`redis://HOST:PORT/DB`: count rate limits there, across workers and replicas.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Proxy addresses or networks (JSON list) whose `X-Forwarded-For` is believed.",
    )
    serve_cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed by CORS (JSON list); none by default."
    )
    serve_public_docs: bool = Field(
        default=False,
        description="`1` serves /metrics, /docs, /redoc and /openapi.json to anyone; otherwise "
        "only to a key with the `ops` scope.",
    )
    serve_head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Seconds a connection has to send a request's whole line and headers, from "
        "its opening or its previous answer; then it is closed.",
    )
    serve_publish_check_s: float = Field(
        default=0.25,
        gt=0,
        le=300,
        description="Seconds between a worker's looks at the local CURRENT pointer for a new "
        "publish (not on a replica, which polls the store).",
    )
    serve_pim_cooldown_s: float = Field(
        default=300.0, ge=0, description="Seconds before another pim-image-sync may start."
    )
    serve_list_cache_mb: int = Field(
        default=128,
        ge=1,
        description="Record cache of the lead list per worker, MiB (and of the digital assets "
        "when their record file cannot be written).",
    )
    serve_gzip_cache_mb: int = Field(
        default=32,
        ge=1,
        description="Gzip-compressed snapshot answers kept per worker, MiB.",
    )
    serve_feed_cache_mb: int = Field(
        default=32,
        ge=1,
        description="Changes-feed pages kept per worker, MiB.",
    )
    serve_past_disk_mb: int = Field(
        default=2048,
        ge=1,
        description="Disk the snapshots rebuilt for the past may take per host, MiB "
        "(`snapshots/.past/`); the least recently made are dropped first.",
    )
    serve_max_waiting: int = Field(
        default=512,
        ge=0,
        description="Long polls (`wait` on the changes feed) one worker holds at once; beyond "
        "it a request is answered at once, as without `wait`.",
    )
    serve_max_waiting_per_key: int = Field(
        default=32,
        ge=0,
        description="Long polls one key may have held by one worker at once; beyond it, "
        "answered at once.",
    )
    serve_max_age_s: float | None = Field(
        default=None,
        gt=0,
        description="Seconds after a stream's last successful sync past which its paths answer "
        "503 and /readyz fails (unset: never).",
    )
    dagster_url: str = Field(
        default="http://127.0.0.1:3000",
        description="Dagster webserver the read API submits pim-image-sync runs to.",
    )
    log_level: str = Field(
        default="info",
        pattern=r"^(critical|error|warning|info|debug)$",
        description="Log level of `ductwork serve`; `info` writes the JSON access log.",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network") from None
        return value


_S = TypeVar("_S", bound=BaseSettings)


def load(kind: type[_S]) -> _S:
    """Load one settings group, turning validation errors into a one-line SettingsError."""
    try:
        return kind()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = PREFIX + str(error["loc"][0]).upper()
            reason = "is not set" if error["type"] == "missing" else error["msg"]
            problems.append(f"{name} {reason}")
        raise SettingsError("; ".join(problems)) from None


def upstream_environment(
    upstream_url: str, api_key: str, s3_endpoint_url: str, bucket: str
) -> dict[str, str]:
    """The variables that point the sync at an upstream and an object store, for a process
    started with them (the demo, tests, benchmarks). The upstream's host:port is listed as an
    image host: these upstreams serve their images themselves, on loopback."""
    return {
        f"{PREFIX}UPSTREAM_URL": upstream_url,
        f"{PREFIX}UPSTREAM_API_KEY": api_key,
        f"{PREFIX}S3_ENDPOINT_URL": s3_endpoint_url,
        f"{PREFIX}S3_BUCKET": bucket,
        f"{PREFIX}IMAGE_HOSTS": urlsplit(upstream_url).netloc,
    }


ALL_GROUPS: tuple[type[BaseSettings], ...] = (
    HomeSettings,
    UpstreamSettings,
    UpstreamTuning,
    SyncSettings,
    HistorySettings,
    RunSettings,
    AlertSettings,
    FileSettings,
    AnalystSettings,
    S3Settings,
    ImageSettings,
    SnapshotStoreSettings,
    ServeSettings,
)
