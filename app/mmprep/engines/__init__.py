"""Engines: what turns a PreparedRequest into text, in a registry by `--engine` name
(registry.py). The interface they implement is mmprep.interface's; its names a user's own
engine needs are handed on here too."""

from ..interface import (
    Engine,
    EngineError,
    EngineHTTPError,
    EngineOutput,
    MediaItem,
    NothingToStart,
    PreparedRequest,
    SamplingParams,
)
from .echo import EchoEngine

__all__ = [
    "EchoEngine",
    "Engine",
    "EngineError",
    "EngineHTTPError",
    "EngineOutput",
    "MediaItem",
    "NothingToStart",
    "PreparedRequest",
    "SamplingParams",
]
