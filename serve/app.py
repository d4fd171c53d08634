"""The read API: the spec's own paths answered from the current published snapshot."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from ductwork.contract.errors import ApiError, ErrorCode, invalid, no_such_path
from ductwork.contract.paths import Family
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings, S3Settings, ServeSettings, SnapshotStoreSettings, load
from ductwork.snapshots.store import SnapshotStore
from serve.data_age import AgeRule, DataAge
from serve.failed_requests import FailedRequestLimit, RefusedClients
from serve.fast_answers import FastAnswers, FastAnswersInFront
from serve.gzip_cache import GZIP_MINIMUM_BYTES, AnswerCache, CompressWhenAsked
from serve.job_trigger import JobTrigger
from serve.live_snapshot import LiveSnapshot
from serve.long_polls import LongPolls
from serve.memento import KeptPublishes, MementoLinks
from serve.observability import Metrics, RequestTelemetry
from serve.openapi_docs import install_openapi
from serve.past import PastRequests
from serve.past_states import PastStates
from serve.rate_limit import LimitCounter, RequestLimit
from serve.responses import error_response
from serve.routers import crm, data_warehouse, health, internal, mirror, products, timemaps
from serve.stream_routes import add_stream_routes

log = logging.getLogger("ductwork.serve")
# The router of each path family; the streams' routes are added to theirs once.
ROUTERS = {
    Family.PRODUCTS: products.router,
    Family.DATA_WAREHOUSE: data_warehouse.router,
    Family.CRM: crm.router,
    Family.INTERNAL: internal.router,
}
add_stream_routes(ROUTERS)


@dataclass(frozen=True)
class AppConfig:
    """What the app was built with."""

    home: HomeSettings
    serve: ServeSettings


class ReadApi(FastAPI):
    """FastAPI with the app's own middleware outside the framework's built-in layers.

    FastAPI wraps user middleware in its server-error, telemetry and body-limit layers; here
    they sit inside ours instead, so the short path's answers (most of the traffic) skip three
    layers they never use. Routed requests still pass through every layer, and an error the
    routes raise is still answered in its family's style; the short path hands its own faults
    to the routes.
    """

    def build_middleware_stack(self) -> ASGIApp:
        ours, self.user_middleware = self.user_middleware, []
        try:
            app = super().build_middleware_stack()
        finally:
            self.user_middleware = ours
        for cls, args, kwargs in reversed(ours):
            app = cls(app, *args, **kwargs)
        return app


@asynccontextmanager
async def _closing_on_shutdown(app: FastAPI) -> AsyncIterator[None]:
    """Bind the key file to the serving loop and start looking for new publishes; on shutdown,
    unbind it, close the snapshot the app serves from (stopping the watcher) and retire this
    worker's metrics."""
    app.state.keys.check_per_turn(asyncio.get_running_loop())
    app.state.live.watch()
    yield
    app.state.keys.check_per_turn(None)
    app.state.live.close()
    app.state.metrics.close()


def create_app(
    home: HomeSettings | None = None,
    serve: ServeSettings | None = None,
    store: SnapshotStoreSettings | None = None,
) -> FastAPI:
    """Build the app over the data folder's snapshots and keys (``DUCTWORK_HOME`` by default);
    with a snapshot store, a replica that serves what the store's pointer names."""
    home = home or load(HomeSettings)
    serve = serve or load(ServeSettings)
    store = store or load(SnapshotStoreSettings)
    app = ReadApi(
        lifespan=_closing_on_shutdown,
        # FastAPI's native OpenTelemetry looks for configured providers on every request; the
        # API reports through its own Prometheus metrics and access log.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        title="ductwork read API",
        summary="A read-only mirror of the HVAC catalog, warehouse and CRM service.",
        version="1.0",
        # Served by install_openapi instead, behind the ops scope.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.live = LiveSnapshot(
        home.snapshots_dir, serve.serve_publish_check_s, serve.serve_list_cache_mb << 20
    )
    if store.snapshot_store is None:
        app.state.live.load_now()
    else:
        # Loaded in the background: /readyz answers 503 until the first snapshot is in.
        source = SnapshotStore.connect(store.snapshot_store, load(S3Settings))
        app.state.live.follow(source, store.snapshot_poll_s)
    app.state.keys = KeyFile(home.keys_path)
    app.state.config = AppConfig(home, serve)
    app.state.feed_pages = AnswerCache(serve.serve_feed_cache_mb << 20, app.state.live.erasures)
    app.state.kept_publishes = KeptPublishes()
    app.state.metrics = Metrics()
    counter = LimitCounter(
        serve.rate_limit_url, None if app.state.metrics.shared else app.state.metrics.registry
    )
    app.state.keyless_limit = RequestLimit(
        counter, "keyless", serve.serve_keyless_requests_per_second
    )
    app.state.key_limit = RequestLimit(counter, "key", serve.serve_key_requests_per_second)
    app.state.long_polls = LongPolls(
        serve.serve_max_waiting,
        serve.serve_max_waiting_per_key,
        None if app.state.metrics.shared else app.state.metrics.registry,
    )
    app.state.job_trigger = JobTrigger(serve.dagster_url, serve.serve_pim_cooldown_s)
    _install_error_handlers(app)
    app.include_router(mirror.router)
    for router in ROUTERS.values():
        app.include_router(router)
    app.include_router(timemaps.router)
    app.include_router(health.router)
    install_openapi(app, serve.serve_public_docs)
    for layer, options in _layers(app, home, serve, counter):
        app.add_middleware(layer, **options)
    return app


def _layers(
    app: FastAPI, home: HomeSettings, serve: ServeSettings, counter: LimitCounter
) -> list[tuple[type, dict[str, Any]]]:
    """The read API's middleware, innermost first (each wraps those before it), with why each
    sits where it does."""
    refused = RefusedClients()
    age = AgeRule(serve.serve_max_age_s)
    gzip_answers = AnswerCache(serve.serve_gzip_cache_mb << 20, app.state.live.erasures)
    past = PastStates(
        home.snapshots_dir,
        serve.serve_list_cache_mb << 20,
        disk_bytes=serve.serve_past_disk_mb << 20,
        erasures=app.state.live.erasures,
    )
    failures = RequestLimit(counter, "failed", serve.serve_failed_requests_per_second)
    layers: list[tuple[type, dict[str, Any]]] = [
        # Innermost of ours, for requests of the past (the past's layer chose their snapshot)
        # and what the short path in front left to the layers.
        (FastAnswers, {}),
        # Inside the past's layer, which marks a request of the past: its answer is of its
        # time, neither dated nor refused as stale.
        (DataAge, {"rule": age}),
        # Outside the short path, so that a request of the past is answered by it too.
        (PastRequests, {"live": app.state.live, "past": past}),
        # Outside the past's layer, whose Memento-Datetime tells a memento from the present
        # (and the data age's, whose 503 varies by Accept-Datetime too).
        (MementoLinks, {}),
    ]
    if serve.serve_cors_origins:
        layers.append((CORSMiddleware, _cors_options(serve.serve_cors_origins)))
    layers += [
        (CompressWhenAsked, {"minimum_size": GZIP_MINIMUM_BYTES, "answers": gzip_answers}),
        # Outside the gzip layer, so that a refused client costs as little as possible.
        (FailedRequestLimit, {"limit": failures, "refused": refused}),
        (RequestTelemetry, {"metrics": app.state.metrics}),
        # The short path again, in front of every layer for the requests of the present they
        # would only add headers to (most of the traffic): it adds those itself.
        (
            FastAnswersInFront,
            {
                "metrics": app.state.metrics,
                "refused": refused,
                "data_age": age,
                "gzip_answers": gzip_answers,
                "cors": bool(serve.serve_cors_origins),
            },
        ),
    ]
    if serve.trusted_proxies:
        # Outermost, so the limits and the access log see the client a trusted proxy names.
        layers.append((ProxyHeadersMiddleware, {"trusted_hosts": serve.trusted_proxies}))
    return layers


def _cors_options(origins: list[str]) -> dict[str, Any]:
    """What CORS allows: GETs from ``origins``, the request headers a client of the API sends
    and the answer headers it reads."""
    return {
        "allow_origins": origins,
        "allow_methods": ["GET"],
        "allow_headers": [
            "Authorization",
            "If-None-Match",
            "If-Modified-Since",
            "X-Request-ID",
            "Accept-Datetime",
        ],
        "expose_headers": [
            "ETag",
            "X-Request-ID",
            "X-Snapshot-Version",
            "X-Synced-At",
            "Retry-After",
            "Memento-Datetime",
            "Link",
            "Content-Location",
        ],
    }


def _install_error_handlers(app: FastAPI) -> None:
    """Every error, including the framework's own, in the style of the path's family."""

    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, error: ApiError) -> Response:
        return error_response(error, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, error: StarletteHTTPException) -> Response:
        if error.status_code == 405:
            # RFC 9110: a 405 names the methods the path does allow; every path is GET-only.
            problem = ApiError(
                ErrorCode.METHOD_NOT_ALLOWED, "Only GET is supported", headers={"Allow": "GET"}
            )
        else:
            problem = no_such_path(request.url.path)
        return error_response(problem, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0] if error.errors() else {}
        name = str((first.get("loc") or ["", "parameter"])[-1])
        return error_response(invalid(name, f"{name} is invalid"), request.url.path)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error on %s", request.url.path)
        internal = ApiError(ErrorCode.INTERNAL, "Internal error")
        return error_response(internal, request.url.path)
