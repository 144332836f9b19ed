"""The engine interface: what turns a PreparedRequest into text.

An engine is any object with `async def generate(request) -> AsyncIterator[EngineOutput]`
plus `start`, `stop` and `ready`. Outputs are text deltas; the last carries the finish
reason and the token counts. Engines know nothing of HTTP or of fetching.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

from ..prepared import PreparedRequest

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class EngineOutput:
    text: str = ""  # the new text since the previous output
    finish_reason: FinishReason | None = None  # set on the last output only
    prompt_tokens: int | None = None  # set on the last output only
    completion_tokens: int | None = None  # set on the last output only


class EngineError(Exception):
    """The engine failed mid-generation; `str(error)` says why."""


class Engine(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def ready(self) -> bool: ...

    def generate(self, request: PreparedRequest) -> AsyncIterator[EngineOutput]: ...
