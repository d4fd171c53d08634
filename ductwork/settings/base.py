"""What every settings group shares: the variables' prefix, the one-line error, loading."""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import urlsplit

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "DUCTWORK_"


class SettingsError(RuntimeError):
    """A setting is missing or malformed; the message names the environment variable."""


class Base(BaseSettings):
    """A settings group: its fields are ``DUCTWORK_``-prefixed environment variables."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")


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
