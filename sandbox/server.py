"""Running the sandbox upstream: the ``ductwork sandbox`` command (``serve``/``main``), an
in-process server for tests and benchmarks (``running_sandbox``), and seeding an object
store with manuals (``seed_bucket``)."""

from __future__ import annotations

import argparse
import importlib.util
import random
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import uvicorn

from sandbox.app import create_app
from sandbox.dataset import SCALES, generate
from sandbox.fault_settings import Faults
from sandbox.faults import FaultInjector
from sandbox.local_server import free_socket, serving
from sandbox.state import SandboxState, build_state

__all__ = [
    "SCALES",
    "Faults",
    "SandboxHandle",
    "build",
    "build_arg_parser",
    "main",
    "running_sandbox",
    "seed_bucket",
    "serve",
]


@dataclass(frozen=True)
class SandboxHandle:
    """A running sandbox: its base URL, its key, and its live state (for tests to inspect)."""

    url: str
    api_key: str
    state: SandboxState


def build(
    seed: int,
    scale: str,
    api_key: str,
    public_url: str,
    *,
    faults: Faults | None = None,
    **options: Any,
) -> tuple[FaultInjector, SandboxState]:
    """Generate the data and wrap the app in its fault layer.

    ``options`` are state knobs: ``s3_endpoint_url``, ``s3_bucket``,
    ``indoor_models_per_second``, ``pim_cooldown_s``.
    """
    state = build_state(generate(seed, scale, public_url), api_key, public_url, seed, **options)
    if faults is not None:
        faults.validate()
        state.faults = faults
    return FaultInjector(create_app(state), state), state


@contextmanager
def running_sandbox(
    seed: int = 7,
    scale: str = "small",
    api_key: str = "sandbox-key",
    faults: Faults | None = None,
    **options: Any,
) -> Iterator[SandboxHandle]:
    """The sandbox on a free 127.0.0.1 port in a background thread, stopped on exit.

    Yields once it answers HTTP; image URLs point at its own ``/media/``.
    """
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app, state = build(seed, scale, api_key, url, faults=faults, **options)
    with serving(app, sock=sock) as served:
        yield SandboxHandle(served, api_key, state)


def _fastest(module: str, fallback: str) -> str:
    return module if importlib.util.find_spec(module) is not None else fallback


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints one line once it accepts connections."""

    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self._line = line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(self._line, flush=True)


def serve(
    port: int,
    seed: int,
    scale: str,
    api_key: str,
    host: str = "127.0.0.1",
    public_url: str | None = None,
    s3_endpoint_url: str | None = None,
    s3_bucket: str | None = None,
    faults: Faults | None = None,
    *,
    indoor_models_per_second: int = 5,
    pim_cooldown_s: float = 30.0,
) -> None:
    """Generate the data and serve it with uvicorn in the foreground until interrupted."""
    public_url = (public_url or f"http://{host}:{port}").rstrip("/")
    started = time.perf_counter()
    app, state = build(
        seed,
        scale,
        api_key,
        public_url,
        faults=faults,
        s3_endpoint_url=s3_endpoint_url,
        s3_bucket=s3_bucket,
        indoor_models_per_second=indoor_models_per_second,
        pim_cooldown_s=pim_cooldown_s,
    )
    took = time.perf_counter() - started
    print(f"sandbox: {scale} data for seed {seed} in {took:.1f}s: {state.stats()}", flush=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(
        app,
        loop=_fastest("uvloop", "asyncio"),
        http=_fastest("httptools", "h11"),
        log_level="warning",
        access_log=False,
    )
    _AnnouncingServer(config, f"sandbox: serving on http://{host}:{port}").run(sockets=[sock])


def seed_bucket(s3: Any, bucket: str, seed: int, count: int) -> list[str]:
    """Put ``count`` deterministic objects under ``manuals/`` (names with spaces, apostrophes
    and non-ASCII letters), and decoys beside the prefix; returns the manuals' keys."""
    rng = random.Random(f"manuals:{seed}")
    keys = []
    for n in range(count):
        name = rng.choice(["install", "Owner's guide", "wiring diagram", "Servicio técnico"])
        key = f"manuals/{n:03d} {name}.pdf"
        body = b"%PDF-1.4\n" + rng.randbytes(64 + n)
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/pdf")
        keys.append(key)
    for decoy in ("manuals-old/a.pdf", "Manuals/b.pdf", "images/x.png"):
        s3.put_object(Bucket=bucket, Key=decoy, Body=b"decoy", ContentType="application/pdf")
    return keys


FAULT_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("error_rate", float, "Share of requests answered 500/502/503/504."),
    ("rate_limit_rate", float, "Share of requests answered 429 with Retry-After."),
    ("retry_after_s", int, "Retry-After of injected 429s, seconds."),
    ("drop_rate", float, "Share of responses cut off mid-body (connection closed)."),
    ("truncate_rate", float, "Share of 200 answers whose JSON body is cut in half."),
    ("html_rate", float, "Share of requests answered 200 with an HTML error page."),
    ("revoke_after", int, "Answer 401 to every request after this many (0: never)."),
    ("latency_ms", float, "Added to every answer, milliseconds."),
    ("seed", int, "Seed of the fault rolls."),
    ("mutate_every", int, "Mutate the data every N requests (0: never)."),
)
# Hostile upstreams, off unless the flag is given.
SWITCH_FLAGS: tuple[tuple[str, str], ...] = (
    ("loop_cursor", "The lead list ignores its cursor and answers its first page again."),
    ("endless_pages", "Page-number lists ignore page and report a billion pages."),
    ("gzip_bomb", "Every answer is gzip behind a gigabyte of compressed whitespace."),
    ("header_flood", "Every answer carries thousands of header fields more."),
)


def build_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``ductwork sandbox``."""
    parser = argparse.ArgumentParser(
        prog="ductwork sandbox", description="The spec-faithful upstream emulator."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", choices=list(SCALES), default="small")
    parser.add_argument("--api-key", required=True, help="The Bearer key clients must send.")
    parser.add_argument("--public-url", default=None, help="Base of image URLs (default: own).")
    parser.add_argument("--s3-endpoint-url", default=None)
    parser.add_argument("--s3-bucket", default=None)
    parser.add_argument("--indoor-models-per-second", type=int, default=5)
    parser.add_argument("--pim-cooldown-s", type=float, default=30.0)
    group = parser.add_argument_group("faults (also settable at run time: PUT /_sandbox/faults)")
    defaults = Faults()
    for name, kind, help_text in FAULT_FLAGS:
        flag = "--" + ("fault-seed" if name == "seed" else name.replace("_", "-"))
        group.add_argument(
            flag, dest=f"fault_{name}", type=kind, help=help_text, default=getattr(defaults, name)
        )
    for name, help_text in SWITCH_FLAGS:
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, dest=f"fault_{name}", action="store_true", help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``ductwork sandbox ...``: generate, print the URL when ready, serve until interrupted."""
    options = build_arg_parser().parse_args(argv)
    known = {f.name for f in fields(Faults)}
    flagged = [name for name, _, _ in FAULT_FLAGS] + [name for name, _ in SWITCH_FLAGS]
    faults = Faults(
        **{name: getattr(options, f"fault_{name}") for name in flagged if name in known}
    )
    try:
        faults.validate()
    except ValueError as exc:
        print(f"ductwork sandbox: {exc}", file=sys.stderr)
        return 2
    try:
        serve(
            options.port,
            options.seed,
            options.scale,
            options.api_key,
            host=options.host,
            public_url=options.public_url,
            s3_endpoint_url=options.s3_endpoint_url,
            s3_bucket=options.s3_bucket,
            faults=faults,
            indoor_models_per_second=options.indoor_models_per_second,
            pim_cooldown_s=options.pim_cooldown_s,
        )
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
