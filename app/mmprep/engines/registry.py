"""The engines `--engine` names, by name: each a factory from the settings, whose module is
imported only when it is chosen (the transformers engine needs torch, the others httpx). An
engine of one's own is `--engine-class` instead (loading.make_engine). Adding an engine is
one module in app/mmprep/engines and one entry here (core/config.py's ENGINES names the choices)."""

from __future__ import annotations

from collections.abc import Callable

from ..core.config import Settings
from ..interface.engine import Engine


def _echo(settings: Settings) -> Engine:
    from .echo import EchoEngine

    return EchoEngine(settings.echo_chars_per_token)


def _workers(settings: Settings) -> Engine:
    from .workers import RemoteWorkersEngine

    return RemoteWorkersEngine(
        settings.worker_url,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
        probe_interval=settings.worker_probe_interval,
    )


def _openai(settings: Settings) -> Engine:
    from .upstream import OpenAIUpstreamEngine

    if settings.upstream_url is None or settings.upstream_model is None:  # Settings refuses this
        raise ValueError("engine 'openai' needs upstream_url and upstream_model")
    return OpenAIUpstreamEngine(
        settings.upstream_url,
        settings.upstream_model,
        api_key=settings.upstream_api_key,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
    )


def _vllm_generate(settings: Settings) -> Engine:
    from ..vllm.request import generate_options
    from .vllm_generate import VllmGenerateEngine

    if settings.upstream_url is None:  # Settings refuses this
        raise ValueError("engine 'vllm-generate' needs upstream_url")
    return VllmGenerateEngine(
        settings.upstream_url,
        generate_options(settings),
        api_key=settings.upstream_api_key,
        connect_timeout=settings.engine_connect_timeout,
        read_timeout=settings.engine_read_timeout,
        allow_untested_version=settings.upstream_allow_untested_version,
    )


ENGINES: dict[str, Callable[[Settings], Engine]] = {
    "echo": _echo,
    "workers": _workers,
    "openai": _openai,
    "vllm-generate": _vllm_generate,
}


def build_engine(settings: Settings) -> Engine:
    """The engine the settings name: --engine-class's, else --engine's (names checked when
    the settings load)."""
    if settings.engine_class is not None:
        from .loading import make_engine

        return make_engine(settings.engine_class)
    if settings.engine not in ENGINES:
        raise ValueError(f"unknown engine {settings.engine!r}")
    return ENGINES[settings.engine](settings)
