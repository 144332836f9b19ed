"""The engine interface: what turns a PreparedRequest into text.

An engine is any object with `async def generate(request)`, an async generator of EngineOutput,
plus `start`, `stop` and `ready`, and the two facts its callers read (`accepted_fields`,
`gives_logprobs`). Outputs are text deltas; the last carries the finish reason and the token
counts. Engines know nothing of HTTP or of fetching.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Collection
from dataclasses import dataclass
from typing import Literal, Protocol

from ..core.errors import ServiceError
from .prepared import PreparedRequest

FinishReason = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True)
class TokenLogprob:
    """One output token's log-probability, and the best alternatives when asked."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()  # (token id, logprob) of the top_logprobs, best first


@dataclass(frozen=True)
class EngineOutput:
    text: str = ""  # the new text since the previous output
    # A token-out engine's new token ids since the previous output (text then stays empty:
    # mmprep detokenizes them with the model folder's tokenizer).
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()  # one per token id, when the request asked for them
    finish_reason: FinishReason | None = None  # set on the last output only
    prompt_tokens: int | None = None  # set on the last output only
    completion_tokens: int | None = None  # set on the last output only


class EngineError(ServiceError):
    """The engine failed: a 500 whose message says why."""

    status = 500
    code = "engine_error"

    def __init__(self, reason: str):
        super().__init__(f"the engine failed: {reason}")


class EngineHTTPError(EngineError):
    """An engine failure with the HTTP status and OpenAI error code a client should see:
    a worker or upstream that refused the request (its status passed on), none reachable
    (503), an answer too long for the model's context (400), ...

    Raised before the first output, it becomes the HTTP error response; after, the
    stream's error event.
    """

    def __init__(self, message: str, status: int, code: str, param: str | None = None):
        ServiceError.__init__(self, message, code, param, status)


async def first_output(outputs: AsyncIterator[EngineOutput]) -> EngineOutput:
    """The first output of a generation. Servers await it before they commit to a stream,
    so that an engine that fails at once gets an HTTP error response, not a broken stream."""
    try:
        return await anext(outputs)
    except StopAsyncIteration:
        raise EngineError("the engine ended without producing any output") from None


class NothingToStart:
    """start, stop and ready for an engine that opens nothing (no model, no connection):
    it is ready from the moment it is made; and the facts of an engine that says nothing
    of the fields it takes or of its logprobs."""

    accepted_fields: Collection[str] | None = None
    gives_logprobs: bool | None = None

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return True


ENGINE_FACTS = {"accepted_fields": None, "gives_logprobs": None}  # each fact's value when not said


class Engine(Protocol):
    """`accepted_fields`: the request fields beyond those mmprep reads (PreparedRequest.extra)
    that the engine can honour: a request with any other is refused with a 400 naming it,
    before any work; None passes every field on.
    `gives_logprobs`: True if its outputs carry logprobs when asked, False if they never do,
    None if it does not say (a text engine is then passed the field; see check_logprobs)."""

    @property
    def accepted_fields(self) -> Collection[str] | None: ...

    @property
    def gives_logprobs(self) -> bool | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def ready(self) -> bool: ...

    def generate(self, request: PreparedRequest) -> AsyncGenerator[EngineOutput, None]: ...


def check_fields(engine: Engine, extra: dict) -> None:
    """Refuse the fields an engine that declares what it takes cannot honour."""
    accepted = engine.accepted_fields
    if accepted is None:
        return
    refused = sorted(set(extra) - set(accepted))
    if refused:
        raise EngineHTTPError(
            f"this model's engine does not take {', '.join(map(repr, refused))}; it takes "
            f"{', '.join(map(repr, sorted(accepted))) or 'no fields beyond the standard ones'}",
            400,
            "unsupported_field",
            refused[0],
        )
