"""The --engine choices, each its engine module's factory from the settings (loading.py
builds the chosen one). The settings check the names (core.config.ENGINE_NAMES, the same
four: the settings sit below the engines, so they hold the names and this the factories).

Imported, not named as strings: the four modules are what `mmprep serve` runs with and cost
some 15 ms beside the service's own imports. An engine that needs torch (the transformers
engine) is an --engine-class, imported only when given."""

from __future__ import annotations

from collections.abc import Callable

from ..core.config import Settings
from ..core.registry import Registry
from ..interface.engine import Engine
from . import echo, upstream, vllm_generate, workers

ENGINES: Registry[Callable[[Settings], Engine]] = Registry(
    "engine",
    {
        "echo": echo.from_settings,
        "workers": workers.from_settings,
        "openai": upstream.from_settings,
        "vllm-generate": vllm_generate.from_settings,
    },
)
