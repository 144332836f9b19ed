"""Engines: what turns a prepared request into text. See base.Engine."""

from .base import Engine, EngineError, EngineHTTPError, EngineOutput
from .echo import EchoEngine

__all__ = ["EchoEngine", "Engine", "EngineError", "EngineHTTPError", "EngineOutput", "build_engine"]


def build_engine(settings) -> Engine:
    """The engine the settings name (the names are checked when settings load)."""
    if settings.engine == "echo":
        return EchoEngine(settings.echo_chars_per_token)
    if settings.engine == "workers":
        from .remote import RemoteWorkersEngine

        return RemoteWorkersEngine(
            settings.worker_url,
            connect_timeout=settings.engine_connect_timeout,
            read_timeout=settings.engine_read_timeout,
            probe_interval=settings.worker_probe_interval,
        )
    if settings.engine == "openai":
        from .upstream import OpenAIUpstreamEngine

        return OpenAIUpstreamEngine(
            settings.upstream_url,
            settings.upstream_model,
            api_key=settings.upstream_api_key,
            connect_timeout=settings.engine_connect_timeout,
            read_timeout=settings.engine_read_timeout,
        )
    raise ValueError(f"unknown engine {settings.engine!r}")
