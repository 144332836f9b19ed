"""The OpenAI chat-completions request, as far as this service reads it.

Message content stays loosely typed here (a string or a list of part objects): the
preprocessor walks the parts itself so that every error names the exact part. Fields this
service does not read itself (tools, response_format, top_k, ignore_eos, ...) are kept as
they came (`model_extra`) and go to the engine unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import ServiceError


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Any] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    n: int = Field(1, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = None
    # vLLM's per-request media options: {"video": {"fps": ..., "num_frames": ..., "max_frames": ...}}
    media_io_kwargs: dict[str, Any] | None = None
    # vLLM's per-request processor options: sampling keys read as sampling, all passed on
    mm_processor_kwargs: dict[str, Any] | None = None


def parse_chat_request(document: Any) -> ChatCompletionRequest:
    """The parsed JSON body as a ChatCompletionRequest, or a ServiceError naming the field."""
    if not isinstance(document, dict):
        raise ServiceError(
            f"the request body must be a JSON object (a chat request), not a JSON {_json_type(document)}",
            "invalid_request",
        )
    try:
        return ChatCompletionRequest.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        param = _param(first["loc"])
        raise ServiceError(f"{param}: {first['msg']}" if param else first["msg"], "invalid_request", param) from None


def _param(location: tuple) -> str | None:
    """A pydantic location as OpenAI names a field: messages[0].content."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
