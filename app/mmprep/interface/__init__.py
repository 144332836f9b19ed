"""The interface between the rooms that prepare a request and the engines that answer it:
the Engine protocol and its outputs (engine.py) and the PreparedRequest handed to it
(prepared.py). Below every room that hands work to an engine or implements one; it imports
only mmprep.core and the libraries."""

from .engine import (
    Engine,
    EngineError,
    EngineHTTPError,
    EngineOutput,
    FinishReason,
    NothingToStart,
    TokenLogprob,
    check_fields,
    first_output,
)
from .prepared import MediaItem, Placeholder, PreparedRequest, SamplingParams, SourceImage, TokenPrompt

__all__ = [
    "Engine",
    "EngineError",
    "EngineHTTPError",
    "EngineOutput",
    "FinishReason",
    "MediaItem",
    "NothingToStart",
    "Placeholder",
    "PreparedRequest",
    "SamplingParams",
    "SourceImage",
    "TokenLogprob",
    "TokenPrompt",
    "check_fields",
    "first_output",
]
