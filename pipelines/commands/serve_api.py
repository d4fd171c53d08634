"""``ductwork serve``: the read API on the current snapshot, with one or several workers."""

from __future__ import annotations

import argparse
import os

from ductwork.settings import HomeSettings, ServeSettings, SnapshotStoreSettings, load
from pipelines.commands.arguments import Subcommands


def add(sub: Subcommands) -> None:
    """``ductwork serve``."""
    serve = sub.add_parser("serve", help="Run the read API on the current snapshot.")
    serve.add_argument("--host", default=None, help="Bind address (DUCTWORK_SERVE_HOST).")
    serve.add_argument("--port", type=int, default=None, help="Port (DUCTWORK_SERVE_PORT).")
    serve.add_argument("--workers", type=int, default=None, help="DUCTWORK_SERVE_WORKERS.")
    serve.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Serve until stopped; the exit code."""
    import shutil
    import tempfile

    import uvicorn

    settings = load(ServeSettings)
    load(HomeSettings)
    load(SnapshotStoreSettings)  # a malformed store URL stops here, in one line
    workers = options.workers or settings.serve_workers
    metrics_dir = None
    if workers > 1:
        # The workers' metric files, summed by /metrics. Local to this machine, not under the
        # data folder: several read-API hosts may share that folder, and their pids collide.
        # prometheus_client reads the variable at import, so it is set before workers start.
        metrics_dir = tempfile.mkdtemp(prefix="ductwork-serve-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    else:
        # One process keeps its metrics in memory; an inherited variable would point it at
        # files other processes may have written.
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    # Imported only now: it imports prometheus_client, which the one-worker server runs in.
    from serve.observability import serve_logging_config
    from serve.worker_processes import run_server, serve_with_workers

    config = uvicorn.Config(
        "serve.app:create_app",
        factory=True,
        host=options.host or settings.serve_host,
        port=settings.serve_port if options.port is None else options.port,
        workers=workers,
        loop="uvloop",
        # httptools with a size and a time limit on every request's line and headers.
        http="serve.request_heads:BoundedHttpToolsProtocol",
        log_config=serve_logging_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,  # the app's JSON access log replaces uvicorn's
        # The app believes X-Forwarded-For from DUCTWORK_TRUSTED_PROXIES only; uvicorn's own
        # handling would believe it from any loopback peer.
        proxy_headers=False,
    )
    try:
        if workers > 1:
            return serve_with_workers(config, workers)
        return run_server(config)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
