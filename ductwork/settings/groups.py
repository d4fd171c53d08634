"""The settings groups of the sync, the data folder, the object store and the analysts'
commands (the read API's are in ``ductwork.settings.serve``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from ductwork.settings.base import Base


class HomeSettings(Base):
    """Where ductwork keeps its data."""

    home: Path = Field(
        default=Path(".ductwork"),
        description="Data folder: warehouse DuckDB, snapshots, API keys and the Dagster home.",
    )
    api_keys_file: Path | None = Field(
        default=None,
        json_schema_extra={"default_shown": "$DUCTWORK_HOME/api-keys.json"},
        description=(
            "The read API's key file (hashes only), for `ductwork keys` and `ductwork serve`; "
            "replicas can mount one Secret here."
        ),
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


class UpstreamSettings(Base):
    """How to reach the upstream service (required by a sync)."""

    upstream_url: str = Field(description="Base URL of the upstream service (required for sync).")
    upstream_api_key: SecretStr = Field(
        description="Bearer API key for the upstream (required for sync; never logged)."
    )


class UpstreamTuning(Base):
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
        description=(
            "Largest upstream answer body (64 MiB), counted after decompression as it arrives; a "
            "larger one fails the step, naming the path and the cap."
        ),
    )


class SyncSettings(Base):
    """Defaults of the incremental streams (each also settable per run in the UI)."""

    lead_window_days: int = Field(
        default=30, ge=0, description="Days of recent leads re-read by every incremental run."
    )
    warehouse_memory_limit: str = Field(
        default="64MB",
        pattern=r"^[0-9]{1,6}(KB|MB|GB|KiB|MiB|GiB)$",
        description=(
            "DuckDB's memory limit during the sync (keeps the sync's memory flat as data grows). "
            "A write that still runs out of memory under it (at large scales, a lead batch joined"
            " against hundreds of thousands of leads) is rolled back and retried under twice the "
            "limit, at most three times, as is a step's read of a whole table (the detail queue, "
            "the submittal requests the catalog implies), with a warning in the run's output; the"
            " step goes on under the raised limit, and the next step starts from the configured "
            "one again. The run holds the warehouse open from its first step to its last, and "
            "DuckDB keeps what it read or wrote cached up to this limit, so it sets much of the "
            "sync's peak memory (measured by `make bench`, `bench/RESULTS.md`). A stream's step "
            "runs DuckDB on one thread (its parsing takes the other core), the publish on every "
            "core. Every run's process also holds glibc's threshold for mapping a large block on "
            "its own at its starting value and keeps two arenas (`ductwork/heap.py`), so that "
            "freed page bodies and Arrow buffers go back to the system rather than stay in the "
            "heap."
        ),
    )


class HistorySettings(Base):
    """What the mirror remembers of the versions it published."""

    history_days: int = Field(
        default=90,
        ge=1,
        description=(
            "Days of published versions the mirror keeps for its changes feed and the past (see "
            "*The mirror's memory*); older ones are dropped at publish, never the current one."
        ),
    )
    history_days_leads: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Days of the leads' versions kept (personal data), when fewer than "
            "`DUCTWORK_HISTORY_DAYS`; unset keeps them as long as the rest. Applied at the next "
            "publish: older versions of the leads and their logged changes are dropped, and the "
            "leads' feed and past answer 410 before that horizon (see *The mirror's memory*)."
        ),
    )
    history_days_contractors: int | None = Field(
        default=None,
        ge=1,
        description="The same for the contractors (personal data).",
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


class RunSettings(Base):
    """How runs share the warehouse and how the scheduler starts them."""

    warehouse_wait_s: float = Field(
        default=3600.0,
        gt=0,
        description=(
            "Seconds a run waits for another run to release the warehouse, then fails naming the "
            "holder."
        ),
    )
    schedules: str = Field(
        default="on",
        pattern=r"^(on|off)$",
        description=(
            "`off` leaves the schedules stopped; otherwise they run wherever the Dagster daemon "
            "runs."
        ),
    )
    sensor_interval_s: int = Field(
        default=30,
        ge=1,
        description=(
            "Seconds between two evaluations of the daemon's sensors (failed-run alerts, "
            "notification retries)."
        ),
    )


class AlertSettings(Base):
    """Where failed runs are reported."""

    # Secret: chat and pager webhooks carry their token in the URL.
    alert_webhook_url: SecretStr | None = Field(
        default=None, description="POSTed a short JSON message for every failed run (optional)."
    )


class NotificationSettings(Base):
    """How change notifications reach their subscribers (``ductwork subscriptions``)."""

    webhook_timeout_s: float = Field(
        default=5.0,
        gt=0,
        # The sensor's delivery pass lasts four timeouts at most and must end within the minute
        # Dagster gives a sensor's evaluation.
        le=10,
        description=(
            "Seconds one change-notification delivery may take, from connecting to the answer's "
            "last header, whatever pace the subscriber answers at (at most 10); a publishing "
            "run's deliveries all end within this long (see *Change notifications*)."
        ),
    )
    webhook_served_wait_s: float = Field(
        default=5.0,
        ge=0,
        le=30,
        description=(
            "Seconds a publishing run waits, before its change notifications leave, for every "
            "local `ductwork serve` worker on the data folder to serve the publish (at most 30); "
            "then they leave anyway, with a warning naming the workers behind. Replicas are not "
            "waited for (see *Change notifications*)."
        ),
    )
    webhook_backoff_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "Seconds before the first retry of a failed delivery; each further failure doubles "
            "it, up to an hour."
        ),
    )
    webhook_give_up_s: float = Field(
        default=86400.0,
        ge=0,
        description=(
            "Seconds a subscriber may keep failing before its subscription is paused (`ductwork "
            "subscriptions replay` resumes it)."
        ),
    )


class FileSettings(Base):
    """Who may read the data folder besides its owner."""

    file_group: str | None = Field(
        default=None,
        description=(
            "A group (name or gid) that may read the data folder: its files become 0640 and its "
            "folders 2750, owned by that group. Unset: files 0600, folders 0700 (see *Who can "
            "read the data folder*)."
        ),
    )


class AnalystSettings(Base):
    """What ``ductwork sql`` and ``ductwork export`` may take of the machine."""

    sql_temp_limit: str = Field(
        default="4GiB",
        pattern=r"^[0-9]{1,6}(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description=(
            "Most DuckDB may spill to disk for one `ductwork sql` or `export`, in a private "
            "folder of its own under the system's temporary folder (`TMPDIR`), removed when the "
            "command ends; beyond it the query fails."
        ),
    )
    sql_memory_limit: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,6}(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description=(
            "DuckDB's memory limit for `ductwork sql` and `export` (beyond it, DuckDB spills); "
            "unset means DuckDB's own, 80 % of the memory."
        ),
    )


class S3Settings(Base):
    """The S3-compatible object store: its bucket is listed by a stream and holds the
    mirrored product images."""

    s3_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint; unset means AWS's default."
    )
    s3_bucket: str = Field(default="ductwork", description="Bucket of manuals and images.")
    s3_region: str = Field(default="us-east-1", description="Region name given to boto3.")


class ImageSettings(Base):
    """Where the image sync may download product images from, and how large they may be."""

    image_hosts: str | None = Field(
        default=None,
        description=(
            "Hosts the image sync downloads from, comma-separated `host` or `host:port`; unset "
            "means the upstream's own host. Only listed hosts may resolve to private, loopback or"
            " link-local addresses."
        ),
    )
    image_max_bytes: int = Field(
        default=10_485_760,
        ge=1,
        description="Largest product image downloaded, bytes; a larger one is refused.",
    )

    @field_validator("image_hosts")
    @classmethod
    def _hosts(cls, value: str | None) -> str | None:
        from ductwork.upstream.image_policy import parse_hosts

        if value is not None:
            parse_hosts(value)  # ValueError names the entry that is not host or host:port
        return value


class SnapshotStoreSettings(Base):
    """Snapshots shared through an object store: the publisher uploads, replicas download."""

    snapshot_store: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$",
        description=(
            "`s3://BUCKET/PREFIX`: every publish also uploads the snapshot there, and `ductwork "
            "serve` becomes a replica that serves what the store names (endpoint and region from "
            "`DUCTWORK_S3_*`; see *Snapshots in the object store*)."
        ),
    )
    snapshot_poll_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description=(
            "Seconds between a replica's checks of the store for a new snapshot (at most 300)."
        ),
    )
