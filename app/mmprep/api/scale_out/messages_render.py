"""POST /v1/messages/render: vLLM's render of an Anthropic Messages request
(entrypoints/scale_out/render/ render_messages_request): the request checked as vLLM's
render checks it (tool_addition/tool_removal blocks and output_config a 400 naming them, not
a silent drop), turned into the chat request vLLM's /v1/messages serves by the conversion
/v1/messages itself uses (app/mmprep/api/common/messages_protocol.py, as vLLM's
to_chat_completion_request), then rendered as the chat render renders it, so the
GenerateRequest is the chat render's.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from ...core.errors import ServiceError
from ...service import Service
from ..common.messages_protocol import MessagesToChat
from ..common.validation import validated
from .chat_render import render_chat_document


class AnthropicMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class AnthropicTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any]
    strict: bool | None = None
    defer_loading: bool | None = None


class AnthropicToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class AnthropicThinking(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None


class MessagesRequest(BaseModel):
    """vLLM's AnthropicMessagesRequest, the fields its conversion reads."""

    model_config = ConfigDict(extra="ignore")

    model: str
    messages: list[AnthropicMessage]
    max_tokens: int
    system: str | list[dict[str, Any]] | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: AnthropicThinking | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    cache_salt: str | None = None
    output_config: dict[str, Any] | None = None


async def render_messages(service: Service, document: Any, http: Request, cancel: threading.Event):
    request = validated(MessagesRequest, document, "an Anthropic Messages request")
    if request.output_config is not None:
        raise ServiceError(
            "output_config is not supported by this server's Messages render",
            "unsupported_field",
            "output_config",
        )
    # the conversion /v1/messages serves with (messages_protocol.py), so both render the same prompt
    return await render_chat_document(service, MessagesToChat().chat_document_of(document), http, cancel)
