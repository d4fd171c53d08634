"""``ductwork serve --workers N``: N worker processes, each listening on a socket of its own.

uvicorn's own supervisor binds one listening socket and hands it to every worker. The worker
that wakes first accepts whatever is queued, so connections opened at once often all land on one
worker while the other idles: in 6 of 10 paced runs of two workers, one took all 32 connections
and the lookups' p99 rose from 10-85 ms to 25-985 ms. Here each worker binds the address itself
with ``SO_REUSEPORT``; the kernel then spreads new connections over the workers' sockets by a
hash of each connection's addresses, and an idle worker cannot take its neighbour's share.

The supervisor holds the port from before the first worker starts until the last one stops
(bound, never listening, so the kernel routes it no connection), starts a new worker in place of
one that ends, and stops them all on SIGINT, SIGTERM or SIGHUP. A worker whose app cannot start
(it cannot be imported, its factory raises, its lifespan start-up fails) stops the whole server
rather than being started again and again. Connections a worker had queued but not accepted when
it dies are reset; with one shared socket another worker would take them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from ductwork import ports

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_WAIT_S = 60.0  # after which a worker that has not ended its graceful shutdown is killed

logger = logging.getLogger("uvicorn.error")


def serve_with_workers(config: uvicorn.Config, workers: int) -> int:
    """Run ``workers`` processes of the app ``config`` names until a stop signal; the exit
    code: 0 once stopped, ``STARTUP_FAILURE`` (3) when the port is taken or a worker could not
    start. ``config.app`` must be an import string, as every worker imports it anew."""
    try:
        holder = _hold_port(config.host, config.port)
    except ports.PortTaken as exc:
        logger.error("%s", exc.strerror)
        return STARTUP_FAILURE
    except OSError as exc:
        logger.error("cannot serve on %s:%s: %s", config.host, config.port, exc)
        return STARTUP_FAILURE
    try:
        port = holder.getsockname()[1]
        logger.info(
            "serving on http://%s:%d with %d workers, each on a socket of its own (SO_REUSEPORT)",
            config.host, port, workers,
        )  # fmt: skip
        return _Supervisor(config, port, workers).run()
    finally:
        holder.close()


def _hold_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT`` that never listens: it keeps the
    port (and settles port 0) while workers come and go.

    Any process of the same user may join a port bound with ``SO_REUSEPORT``, so a second
    server started on a port already served would silently take half its connections. A plain
    bind first refuses a port another process listens on (``PortTaken``)."""
    port = ports.bindable_port(host, port)
    holder = ports.reusable_socket(host)
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, port))
    except OSError:
        holder.close()
        raise
    return holder


def _run_worker(config: uvicorn.Config, port: int) -> None:
    """One worker, in a process of its own: bind the shared port, then serve until stopped."""
    config.configure_logging()  # the config came pickled; its logging was set up in the parent
    sock = ports.reusable_socket(config.host)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((config.host, port))
    except OSError as exc:
        logger.error("worker [%d] cannot bind %s:%d: %s", os.getpid(), config.host, port, exc)
        sys.exit(STARTUP_FAILURE)
    # A hang-up (its terminal closing) stops a worker as SIGTERM does, finishing what it holds,
    # rather than by the default action of SIGHUP, which ends it at once.
    signal.signal(signal.SIGHUP, lambda _signum, _frame: os.kill(os.getpid(), signal.SIGTERM))
    exit_code = run_server(config, sockets=[sock])  # it listens once the app has started
    if exit_code:
        sys.exit(exit_code)


def run_server(config: uvicorn.Config, sockets: list[socket.socket] | None = None) -> int:
    """Serve the app ``config`` names until stopped (on ``sockets`` when given); the exit code:
    0, or ``STARTUP_FAILURE`` (3) when the app did not start, whatever stopped it (uvicorn exits
    with it itself when the app cannot be imported, but lets anything else the factory raises
    through: a supervisor would then start the worker again and again)."""
    server = uvicorn.Server(config)
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        pass  # uvicorn raises SIGINT again once it has stopped gracefully
    except Exception as exc:
        if server.started:
            raise
        logger.error("[%d] the app could not start: %s: %s", os.getpid(), type(exc).__name__, exc)
        logger.debug("where the app's start failed", exc_info=True)  # DUCTWORK_LOG_LEVEL=debug
    return 0 if server.started else STARTUP_FAILURE


class _Supervisor:
    """Starts the workers, replaces one that ends, and stops them all on a stop signal."""

    def __init__(self, config: uvicorn.Config, port: int, workers: int) -> None:
        self._config = config
        self._port = port
        self._count = workers
        self._context = multiprocessing.get_context("spawn")  # a fresh interpreter per worker
        self._workers: list[BaseProcess] = []
        self._stop_signal: int | None = None

    def run(self) -> int:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        previous = {sig: signal.signal(sig, self._on_stop_signal) for sig in STOP_SIGNALS}
        previous_wakeup = signal.set_wakeup_fd(wake_write)
        try:
            self._workers = [self._start() for _ in range(self._count)]
            exit_code = self._watch(wake_read)
            self._stop_all()
            return exit_code
        finally:
            signal.set_wakeup_fd(previous_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(wake_read)
            os.close(wake_write)

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._stop_signal = signum  # the wake-up pipe ends the wait in ``_watch``

    def _start(self) -> BaseProcess:
        worker = self._context.Process(
            target=_run_worker, args=(self._config, self._port), name="ductwork-serve-worker"
        )
        worker.start()
        logger.info("started worker [%d]", worker.pid)
        return worker

    def _watch(self, wake_read: int) -> int:
        """Wait for a stop signal or a worker's end; replace a worker that ended. The exit code
        the server ends with."""
        while True:
            wait([wake_read, *(worker.sentinel for worker in self._workers)])
            if self._stop_signal is not None:
                name = signal.Signals(self._stop_signal).name
                logger.info("%s received: stopping the workers", name)
                return 0
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 512)  # emptied only now: a signal may have written to it
            for index, worker in enumerate(self._workers):
                if worker.exitcode is None:
                    continue
                if worker.exitcode == STARTUP_FAILURE:
                    logger.error("worker [%d] could not start: stopping the server", worker.pid)
                    return STARTUP_FAILURE
                logger.warning(
                    "worker [%d] ended (exit code %d); starting another in its place",
                    worker.pid, worker.exitcode,
                )  # fmt: skip
                self._workers[index] = self._start()

    def _stop_all(self) -> None:
        for worker in self._workers:
            if worker.exitcode is None:
                worker.terminate()  # SIGTERM: uvicorn's graceful shutdown
        for worker in self._workers:
            worker.join(STOP_WAIT_S)
            if worker.exitcode is None:
                logger.warning("worker [%d] still up after %.0f s: killed", worker.pid, STOP_WAIT_S)
                worker.kill()
                worker.join()
