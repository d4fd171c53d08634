"""Sync benchmarks against the sandbox running in its own process.

Measures, in one run so the figures are comparable:
1. client throughput on lead details (one small request each, most of a full sync's requests):
   httpx's async client, aiohttp, and ductwork's UpstreamClient, median of 3 each;
2. a full sync of every stream, then a no-change incremental run, with requests per stream.

    uv run python -m bench.sync_bench --scale small --out bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import dagster as dg
import httpx

from ductwork.local_server import free_socket
from ductwork.upstream.client import UpstreamClient
from pipelines.processes import ProcessGroup, installed_command, wait_until_answering

KEY = "bench-key"
BUCKET = "ductwork-bench"


async def _ids(url: str, count: int) -> list[str]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as c:
        leads = (await c.get("/crm/v1.1/leads", params={"count": 1000})).json()["data"]
    return [lead["Id"] for lead in leads] * (count // len(leads) + 1)


async def _httpx_rate(url: str, ids: list[str]) -> float:
    limits = httpx.Limits(max_connections=8)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=url, limits=limits, headers=headers) as client:
        gate = asyncio.Semaphore(8)

        async def one(ident: str) -> None:
            async with gate:
                await client.get(f"/crm/v1.1/leads/{ident}")  # reads the whole body

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in ids))
    return len(ids) / (time.perf_counter() - started)


async def _aiohttp_rate(url: str, ids: list[str]) -> float:
    headers = {"Authorization": f"Bearer {KEY}"}
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def one(ident: str) -> None:
            async with session.get(f"{url}/crm/v1.1/leads/{ident}") as response:
                await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in ids))
    return len(ids) / (time.perf_counter() - started)


async def _ductwork_rate(url: str, ids: list[str]) -> float:
    async with UpstreamClient(url, KEY, concurrency=8) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client.get(f"/crm/v1.1/leads/{i}") for i in ids))
    return len(ids) / (time.perf_counter() - started)


def client_rates(url: str, requests: int) -> dict[str, list[float]]:
    """Requests per second of each client, three runs each, interleaved."""
    ids = asyncio.run(_ids(url, requests))[:requests]
    rates: dict[str, list[float]] = {"httpx": [], "aiohttp": [], "ductwork UpstreamClient": []}
    for _ in range(3):
        rates["httpx"].append(asyncio.run(_httpx_rate(url, ids)))
        rates["aiohttp"].append(asyncio.run(_aiohttp_rate(url, ids)))
        rates["ductwork UpstreamClient"].append(asyncio.run(_ductwork_rate(url, ids)))
    return rates


def timed_sync(home: Path, url: str, s3_url: str) -> tuple[float, dict[str, dict]]:
    """One run of every stream; wall seconds and each asset's metadata."""

    from assets.resources import resources_for_home
    from ductwork.settings import S3Settings
    from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED

    s3 = S3Settings(s3_endpoint_url=s3_url, s3_bucket=BUCKET)
    resources = resources_for_home(home, url, KEY, s3)
    started = time.perf_counter()
    result = dg.materialize([*SYNCED_AND_PUBLISHED, *ALL_CHECKS], resources=resources)
    wall = time.perf_counter() - started
    assert result.success
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        values = {k: v.value for k, v in materialization.metadata.items()}
        metadata[materialization.asset_key.path[-1]] = values
    return wall, metadata


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="small", choices=["small", "medium", "large"])
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    ports = [free_socket().getsockname()[1] for _ in range(2)]
    url, s3_url = (f"http://127.0.0.1:{port}" for port in ports)
    with ProcessGroup() as group:
        moto = group.start(
            [installed_command("moto_server"), "-H", "127.0.0.1", "-p", str(ports[1])]
        )
        wait_until_answering(s3_url, moto)
        from assets.resources import ObjectStore
        from sandbox.server import seed_manuals

        s3 = ObjectStore(bucket=BUCKET, endpoint_url=s3_url).client()
        s3.create_bucket(Bucket=BUCKET)
        seed_manuals(s3, BUCKET, 1, 40)
        sandbox = group.start([sys.executable, "-m", "sandbox", "--port", str(ports[0]),
                               "--scale", options.scale, "--api-key", KEY,
                               "--s3-endpoint-url", s3_url, "--s3-bucket", BUCKET])  # fmt: skip
        wait_until_answering(url + "/healthz", sandbox, timeout_s=600)
        rates = client_rates(url, options.requests)
        with tempfile.TemporaryDirectory() as home:
            full_s, full = timed_sync(Path(home), url, s3_url)
            again_s, again = timed_sync(Path(home), url, s3_url)
    report = render(options.scale, options.requests, rates, full_s, full, again_s, again)
    print(report)
    if options.out:
        options.out.write_text(report, encoding="utf-8")
    return 0


def render(scale: str, requests: int, rates: dict[str, list[float]], full_s: float,
           full: dict[str, dict], again_s: float, again: dict[str, dict]) -> str:  # fmt: skip
    """The results as markdown."""
    command = f"uv run python -m bench.sync_bench --scale {scale} --requests {requests}"
    lines = [
        f"## Sync at scale `{scale}` ({os.cpu_count()} cores)",
        "",
        f"Command: `{command}`",
        "",
    ]
    lines += ["### Client throughput: lead details (requests/s, 8 connections)", "",
              "| client | run 1 | run 2 | run 3 | median | vs httpx |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip  # noqa: E501
    base = statistics.median(rates["httpx"])
    for name, runs in rates.items():
        median = statistics.median(runs)
        cells = " | ".join(f"{r:,.0f}" for r in runs)
        lines.append(f"| {name} | {cells} | {median:,.0f} | {median / base:.1f}x |")
    lines += ["", f"### Full sync {full_s:.1f} s; no-change incremental run {again_s:.1f} s "
              f"({again_s / full_s:.1%} of the full sync)", "",
              "| asset | rows | requests (full) | requests (no change) |", "| --- | --- | --- | --- |"]  # fmt: skip  # noqa: E501
    for name in sorted(full):
        rows = full[name].get("dagster/row_count", "")
        lines.append(f"| {name} | {rows} | {full[name].get('requests', '-')} | "
                     f"{again.get(name, {}).get('requests', '-')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
