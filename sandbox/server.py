"""Running the sandbox upstream: the ``ductwork sandbox`` command, an in-process server for
tests and benchmarks, and seeding the object store with manuals."""

from __future__ import annotations

import argparse
import random
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from ductwork.local_server import free_socket, serving
from sandbox.app import create_app
from sandbox.dataset import SCALES, generate
from sandbox.faults import FaultInjector
from sandbox.state import Faults, SandboxState, build_state


@dataclass(frozen=True)
class SandboxHandle:
    """A running sandbox: where it is, its key, and its live state (for tests to inspect)."""

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
) -> tuple[Any, SandboxState]:
    """Generate the data and wrap the app with its fault layer."""
    state = build_state(generate(seed, scale, public_url), api_key, public_url, seed, **options)
    if faults is not None:
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
    """The sandbox on a free loopback port in a background thread, stopped on exit."""
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app, state = build(seed, scale, api_key, url, faults=faults, **options)
    with serving(app, sock=sock) as served:
        yield SandboxHandle(served, api_key, state)


def seed_manuals(s3: Any, bucket: str, seed: int, count: int) -> list[str]:
    """Put ``count`` deterministic manuals under ``manuals/`` (and decoys beside the prefix)."""
    rng = random.Random(seed)
    keys = []
    for n in range(count):
        name = rng.choice(["install", "Owner's guide", "wiring diagram", "Servicio técnico"])
        key = f"manuals/{n:03d} {name}.pdf"
        body = rng.randbytes(64 + n)
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/pdf")
        keys.append(key)
    for decoy in ("manuals-old/a.pdf", "Manuals/b.pdf", "images/x.png"):
        s3.put_object(Bucket=bucket, Key=decoy, Body=b"decoy", ContentType="application/pdf")
    return keys


FAULT_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("error_rate", float, "Share of requests answered 500/502/503/504."),
    ("rate_limit_rate", float, "Share of requests answered 429 with Retry-After."),
    ("retry_after_s", int, "Retry-After of injected 429s, seconds."),
    ("drop_rate", float, "Share of connections closed mid-response."),
    ("latency_ms", float, "Added to every answer, milliseconds."),
    ("mutate_every", int, "Mutate the data every N requests (0: never)."),
)


def build_arg_parser() -> argparse.ArgumentParser:
    """Arguments of ``ductwork sandbox``."""
    parser = argparse.ArgumentParser(
        prog="ductwork sandbox", description="The spec-faithful upstream emulator."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--api-key", required=True, help="The Bearer key clients must send.")
    parser.add_argument("--public-url", default=None, help="Base of image URLs (default: own).")
    parser.add_argument("--s3-endpoint-url", default=None)
    parser.add_argument("--s3-bucket", default=None)
    parser.add_argument("--indoor-models-per-second", type=int, default=5)
    parser.add_argument("--pim-cooldown-s", type=float, default=30.0)
    faults = parser.add_argument_group("faults (also settable at run time: PUT /_sandbox/faults)")
    for name, kind, help_text in FAULT_FLAGS:
        flag = "--" + name.replace("_", "-")
        faults.add_argument(flag, dest=f"fault_{name}", type=kind, help=help_text,
                            default=getattr(Faults(), name))  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``ductwork sandbox ...``: serve until interrupted."""
    options = build_arg_parser().parse_args(argv)
    public_url = options.public_url or f"http://{options.host}:{options.port}"
    faults = Faults(**{name: getattr(options, f"fault_{name}") for name, _, _ in FAULT_FLAGS})
    print(f"sandbox: generating {options.scale} data (seed {options.seed})", flush=True)
    app, _ = build(
        options.seed, options.scale, options.api_key, public_url, faults=faults,
        s3_endpoint_url=options.s3_endpoint_url, s3_bucket=options.s3_bucket,
        indoor_models_per_second=options.indoor_models_per_second,
        pim_cooldown_s=options.pim_cooldown_s,
    )  # fmt: skip
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    print(f"sandbox: serving on http://{options.host}:{options.port}", flush=True)
    config = uvicorn.Config(app, loop="uvloop", http="httptools", log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
