"""The read API's settings group."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from ductwork.settings.base import Base


class ServeSettings(Base):
    """The read API."""

    serve_host: str = Field(default="127.0.0.1", description="Address the read API binds.")
    serve_port: int = Field(default=8080, description="Port the read API binds.")
    serve_workers: int = Field(
        default=2,
        ge=1,
        description=(
            "Worker processes of `ductwork serve` (uvicorn servers), each listening on a socket "
            "of its own (see *Worker processes*)."
        ),
    )
    serve_keyless_requests_per_second: int = Field(
        default=5,
        ge=1,
        description=(
            "Calls per client address (an IPv6 client: per /64) per second to the paths served "
            "without a key (indoor models)."
        ),
    )
    serve_key_requests_per_second: int = Field(
        default=1000,
        ge=1,
        description=(
            "Units per API key per second: a call is one, a list page one per hundred records it "
            "asks for, a changes-feed page one per hundred entries, a request of the past that "
            "opens or rebuilds a past snapshot 100 or 1000 more (per process unless counted in "
            "Redis; see *What a request costs*)."
        ),
    )
    serve_failed_requests_per_second: int = Field(
        default=10,
        ge=1,
        description=(
            "401 answers, and 404s to requests without a valid key, per client address (an IPv6 "
            "client: per /64) per second; beyond it every request from that address gets 429 "
            "until the window has room."
        ),
    )
    rate_limit_url: str | None = Field(
        default=None,
        pattern=r"^rediss?://",
        description=(
            "`redis://[:PASSWORD@]HOST:PORT/DB`: both rate limits counted there, across every "
            "worker and replica; unset, each process counts alone (never logged)."
        ),
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description=(
            'Addresses or networks of proxies (JSON list, e.g. `["10.96.12.0/28"]`: the ingress\'s'
            " own addresses, never a whole cluster network) whose `X-Forwarded-For` names the "
            "client; none by default."
        ),
    )
    serve_cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed by CORS (JSON list); none by default."
    )
    serve_public_docs: bool = Field(
        default=False,
        description=(
            "`1` (or `true`) serves `/metrics`, `/docs`, `/redoc` and `/openapi.json` to anyone; "
            "otherwise only to a key with the `ops` scope."
        ),
    )
    serve_head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "Seconds a connection to `ductwork serve` has to send a request's whole line and "
            "headers, from its opening or its previous answer; then it is closed (see *Limits on "
            "what a client sends*)."
        ),
    )
    serve_publish_check_s: float = Field(
        default=0.25,
        gt=0,
        le=300,
        description=(
            "Seconds between a worker's looks at the local `snapshots/CURRENT` for a new publish "
            "(one `stat` each; at most 300): each worker then loads it without waiting for a "
            "request. Not used by a replica, which polls the store every "
            "`DUCTWORK_SNAPSHOT_POLL_S`."
        ),
    )
    serve_pim_cooldown_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "Seconds before another pim-image-sync may start, counted from the newest such run in"
            " the Dagster run queue (the same for every replica)."
        ),
    )
    serve_list_cache_mb: int = Field(
        default=128,
        ge=1,
        description=(
            "Record cache of the lead list per worker, MiB (and of the digital assets when their "
            "record file cannot be written)."
        ),
    )
    serve_gzip_cache_mb: int = Field(
        default=32,
        ge=1,
        description=(
            "Gzip-compressed snapshot answers kept per worker, MiB, keys included (each "
            "compressed once per snapshot, path and the parameters its route reads)."
        ),
    )
    serve_feed_cache_mb: int = Field(
        default=32,
        ge=1,
        description=(
            "Changes-feed pages kept per worker, MiB, keys included: a page is the same bytes for"
            " the same snapshot, stream, token, limit and format, so a page read from the history"
            " is read once per worker (a JSON page a change file holds is not kept: it is sliced "
            "again where the file lies, its gzip form kept with the other compressed answers)."
        ),
    )
    serve_past_disk_mb: int = Field(
        default=2048,
        ge=1,
        description=(
            "Disk the snapshots rebuilt for the past (`snapshots/.past/`, with their checksums "
            "and record files) may take per host, MiB; the least recently made are dropped first "
            "(see *The mirror's memory*)."
        ),
    )
    serve_max_waiting: int = Field(
        default=512,
        ge=0,
        description=(
            "Long polls (`wait` on the changes feed) one worker holds at once; beyond it a "
            "request with `wait` is answered at once, as without it (see *What a request costs*)."
        ),
    )
    serve_max_waiting_per_key: int = Field(
        default=32,
        ge=0,
        description=(
            "Long polls one key may have held by one worker at once; beyond it, answered at once."
        ),
    )
    serve_max_age_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Seconds after a stream's last successful sync past which its paths answer 503 with "
            "`Retry-After` and `/readyz` fails (unset: never; see *How old the data is*)."
        ),
    )
    dagster_url: str = Field(
        default="http://127.0.0.1:3000",
        description=(
            "Dagster webserver the read API submits pim-image-sync runs to (its run queue)."
        ),
    )
    log_level: str = Field(
        default="info",
        pattern=r"^(critical|error|warning|info|debug)$",
        description="Log level of `ductwork serve`; `info` and below write the JSON access log.",
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
