"""How `mmprep serve` runs the app: uvicorn, with the connection limits of connections.py."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from ..core.config import Settings
from .connections import ConnectionLimits, ensure_file_limit, guarded_protocol

GRACEFUL_SHUTDOWN_SECONDS = 30


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
        http=guarded_protocol(connection_limits(settings), service.metrics,
                              on_refused=lambda error: service.record(error.status, error.code)),
        backlog=settings.backlog,
        timeout_keep_alive=settings.keep_alive_timeout,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **options,
    )


def serve(app: FastAPI, settings: Settings, log_config: dict) -> None:
    try:
        ensure_file_limit(settings.max_connections)
    except ValueError as error:
        raise SystemExit(f"mmprep serve: {error}") from None
    uvicorn.Server(server_config(app, settings, log_config=log_config)).run()
