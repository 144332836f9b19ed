"""Engines: what turns a PreparedRequest into text. See base.Engine."""

from .base import Engine, EngineError, EngineHTTPError, EngineOutput
from .echo import EchoEngine
from .prepared import MediaItem, PreparedRequest, SamplingParams

__all__ = [
    "EchoEngine",
    "Engine",
    "EngineError",
    "EngineHTTPError",
    "EngineOutput",
    "MediaItem",
    "PreparedRequest",
    "SamplingParams",
]
