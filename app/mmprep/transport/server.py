"""How `mmprep serve` runs the app: uvicorn, with the connection limits of connections.py."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import signal
import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from ..core.config import Settings
from .connections import ConnectionLimits, fit_open_files, guarded_protocol, renew_idle_connections

GRACEFUL_SHUTDOWN_SECONDS = 30

log = logging.getLogger("mmprep.server")


def connection_limits(settings: Settings) -> ConnectionLimits:
    return ConnectionLimits(
        keep_alive_timeout=settings.keep_alive_timeout,
        header_timeout=settings.header_timeout,
        write_timeout=settings.write_timeout,
        send_buffer_bytes=settings.send_buffer_bytes,
        max_connections=settings.max_connections,
    )


def server_config(app: FastAPI, settings: Settings, **options) -> uvicorn.Config:
    """uvicorn's config for `app` (made by create_app): its service's settings and metrics."""
    service = app.state.service
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=guarded_protocol(
            connection_limits(settings),
            service.metrics,
            on_refused=lambda error: service.record(error.status, error.code),
        ),
        backlog=settings.backlog,
        # uvicorn annotates it int, but its protocols only hand it to loop.call_later (float seconds).
        timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **vllm_server_options(settings),
        **options,
    )


def vllm_server_options(settings: Settings) -> dict:
    """uvicorn's options that vllm serve's flags of the same names set: TLS and its own log level."""
    options: dict = {}
    if settings.ssl_keyfile is not None:
        options.update(
            ssl_keyfile=str(settings.ssl_keyfile),
            ssl_certfile=str(settings.ssl_certfile),
            ssl_ca_certs=None if settings.ssl_ca_certs is None else str(settings.ssl_ca_certs),
            ssl_cert_reqs=settings.ssl_cert_reqs,
        )
    if settings.uvicorn_log_level is not None:
        options["log_level"] = settings.uvicorn_log_level
    return options


def build_server(app: FastAPI, settings: Settings, **options) -> uvicorn.Server:
    """uvicorn's server for `app`, whose idle connections are renewed when the service goes
    idle after a burst (connections.py: memory they would otherwise pin)."""
    server = uvicorn.Server(server_config(app, settings, **options))
    app.state.service.memory.before_release(lambda: renew_idle_connections(server.server_state.connections))
    return server


def serve(
    app: FastAPI, settings: Settings, log_config: dict, sockets: list[socket.socket] | None = None
) -> None:
    settings = within_open_files(settings)
    server = build_server(app, settings, log_config=log_config)
    server.run(sockets=sockets)
    if not server.started:  # the start failed, logged; older uvicorns' Server.run returns 0 then
        raise SystemExit(3)  # uvicorn.run's own status for a failed start


def within_open_files(settings: Settings) -> Settings:
    """The settings with --max-connections that this process's open-file limit allows: the
    default is lowered to fit (with a log line); a limit asked for that cannot be held
    stops the server, saying what to change."""
    fits = fit_open_files(settings.max_connections)
    if fits == settings.max_connections:
        return settings
    if settings.max_connections != Settings.model_fields["max_connections"].default:
        raise SystemExit(
            f"mmprep serve: --max-connections {settings.max_connections} needs more open files than "
            f"the hard limit allows (room for {fits}): lower it, or raise the limit "
            "(ulimit -Hn, LimitNOFILE=)"
        )
    log.warning(
        "the open-file limit holds %d connections: --max-connections lowered from %d",
        fits,
        settings.max_connections,
    )
    return settings.model_copy(update={"max_connections": fits})


def serve_processes(settings: Settings, processes: int, make_app: Callable[[Settings], FastAPI]) -> int:
    """`processes` mmprep processes on one port, for when one event loop is not enough; each
    serves the app `make_app` makes of the settings (a module-level function: it is pickled
    by name to each child).

    Each child listens on its own socket with SO_REUSEPORT, so the kernel spreads new
    connections evenly among them; each has its own engine, decode pool, cache and limits
    (--max-concurrent-requests and --max-connections are per process). This process only
    watches them: SIGTERM or Ctrl-C stops them all (each drains as one process would), and
    one that dies stops the rest. Returns the exit status."""
    context = multiprocessing.get_context("spawn")  # a clean interpreter each: no threads or loops forked
    children = [
        context.Process(target=_serve_child, args=(settings, make_app), name=f"mmprep-serve-{i}")
        for i in range(processes)
    ]
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True
        for child in children:
            if child.is_alive():
                child.terminate()  # SIGTERM: uvicorn's graceful shutdown

    signal.signal(signal.SIGTERM, stop)  # before any child starts: none may outlive this process
    signal.signal(signal.SIGINT, stop)
    for child in children:
        if not stopping:
            child.start()
    children = [child for child in children if child.pid is not None]
    while any(child.is_alive() for child in children):
        # With a timeout: a child may end between the check above and the list (then none is left to wait on).
        multiprocessing.connection.wait([child.sentinel for child in children if child.is_alive()], timeout=1)
        if not stopping and any(child.exitcode is not None for child in children):
            log.error(
                "an mmprep serve process exited (status %s); stopping the others",
                next(child.exitcode for child in children if child.exitcode is not None),
            )
            stop()
    for child in children:
        child.join()
    return 0 if stopping else 1


def _serve_child(settings: Settings, make_app: Callable[[Settings], FastAPI]) -> None:
    from ..core.logging import configure_logging

    log_config = configure_logging(settings.log_level)
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.host, settings.port))
    serve(make_app(settings), settings, log_config, sockets=[sock])
