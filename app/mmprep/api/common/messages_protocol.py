"""Anthropic's Messages request as the chat request vLLM 0.33's AnthropicServingMessages makes
of it, what /v1/messages serves and /v1/messages/render renders: system text first; text and
image blocks as parts; tool_use blocks as the assistant's tool calls; tool_result blocks as
tool messages before the user's turn; thinking blocks as the turn's reasoning. And the error
types Anthropic's error shape names by status (`error_type`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...core.errors import ServiceError
from ...media.data_url import DataURL
from .chat_protocol import ChatCompletionRequest, parse_chat_request
from .translation import FieldError, FieldNames, body_object, invalid

# Anthropic's error types by status, as vLLM's translate_error_type
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_type(status: int) -> str:
    """The type Anthropic's error shape gives a status (its answers' and the API keys' 401)."""
    return ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


BILLING_HEADER = "x-anthropic-billing-header"


class ImageSource(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    type: Literal["base64", "url"]
    media_type: str = "image/jpeg"
    data: str | None = None
    url: str | DataURL | None = None  # a long data URL comes parsed (json_body.py)

    @model_validator(mode="after")
    def _has_its_field(self) -> ImageSource:
        if self.type == "base64" and not self.data:
            raise FieldError("data", "a base64 source needs its data")
        if self.type == "url" and not self.url:
            raise FieldError("url", "a url source needs its url")
        return self

    def as_url(self) -> str | DataURL:
        if self.type == "url":
            assert self.url is not None
            return self.url
        return f"data:{self.media_type};base64,{self.data}"


class Block(BaseModel):
    """A content block: one model for every type, as vLLM's AnthropicContentBlock, each
    type's own fields required by the validator."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"]
    text: str | None = None
    source: ImageSource | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None

    @model_validator(mode="after")
    def _has_its_fields(self) -> Block:
        needs = {"text": "text", "image": "source", "tool_use": "name", "tool_result": "tool_use_id"}
        field = needs.get(self.type)
        if field is not None and getattr(self, field) is None:
            raise FieldError(field, f"a {self.type} block needs {field}")
        if self.type == "thinking" and self.thinking is None:
            raise FieldError("thinking", "a thinking block needs thinking")
        return self


class Message(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any]


class ToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _named(self) -> ToolChoice:
        if self.type == "tool" and not self.name:
            raise FieldError("name", 'a "tool" choice names the tool')
        return self


class Thinking(BaseModel):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(None, ge=1024)

    @model_validator(mode="after")
    def _budget(self) -> Thinking:
        if self.type == "enabled" and self.budget_tokens is None:
            raise FieldError("budget_tokens", "enabled thinking needs budget_tokens")
        return self


class MessagesRequest(BaseModel):
    """Anthropic's request as vLLM's AnthropicMessagesRequest types it; chat_template_kwargs
    is vLLM's own addition. Other fields go on to the chat request as they came, as a chat
    request's extra fields do (media_io_kwargs, mm_processor_kwargs, an engine's own)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[Message] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[Block] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    metadata: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _budget_below_max(self) -> MessagesRequest:
        budget = self.thinking.budget_tokens if self.thinking else None
        if budget is not None and budget >= self.max_tokens:
            raise FieldError("thinking.budget_tokens", "must be less than max_tokens")
        return self


class MessagesToChat:
    """One Messages request as a chat request, the chat request's field names kept in the
    client's (`names`: an error says the field as the client wrote it)."""

    def __init__(self) -> None:
        self.names = FieldNames()

    def chat_request(self, document: Any) -> ChatCompletionRequest:
        return parse_chat_request(self.chat_document_of(document))

    def chat_document_of(self, document: Any) -> dict[str, Any]:
        """The JSON body as the chat request's JSON (what /v1/messages/render renders too)."""
        try:
            request = MessagesRequest.model_validate(body_object(document, "a messages request"))
        except ValidationError as error:
            raise invalid(error) from None
        return self.chat_document(request)

    def chat_document(self, request: MessagesRequest) -> dict[str, Any]:
        chat: dict[str, Any] = {
            **(request.model_extra or {}),
            "model": request.model,
            "messages": self._messages(request),
            "max_tokens": request.max_tokens,
            "stream": request.stream,
        }
        self.names.add("max_completion_tokens", "max_tokens")
        if request.stream:
            chat["stream_options"] = {"include_usage": True}  # message_delta carries the usage
        if request.stop_sequences:
            chat["stop"] = request.stop_sequences
            self.names.add("stop", "stop_sequences")
        for field in ("temperature", "top_p", "top_k", "chat_template_kwargs"):
            if getattr(request, field) is not None:
                chat[field] = getattr(request, field)
        if request.thinking is not None and request.thinking.type == "disabled":
            chat["reasoning_effort"] = "none"  # vLLM's default for turning thinking off
            self.names.add("reasoning_effort", "thinking")
        if request.tools is not None:
            chat["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                }
                for tool in request.tools
            ]
            chat["tool_choice"] = "auto"
            for i in range(len(request.tools)):
                self.names.add(f"tools[{i}].function.parameters", f"tools[{i}].input_schema")
                self.names.add(f"tools[{i}].function", f"tools[{i}]")
        if request.tool_choice is not None:
            chat["tool_choice"] = _tool_choice(request.tool_choice)
            chat["parallel_tool_calls"] = not request.tool_choice.disable_parallel_tool_use
        return chat

    def _messages(self, request: MessagesRequest) -> list[dict[str, Any]]:
        chat: list[dict[str, Any]] = []
        system = _text_of(request.system)
        if system:
            chat.append({"role": "system", "content": system})
        for i, message in enumerate(request.messages):
            if message.role == "system":
                if text := _text_of(message.content):
                    chat.append({"role": "system", "content": text})
                continue
            if isinstance(message.content, str):
                self.names.add(f"messages[{len(chat)}]", f"messages[{i}]")
                chat.append({"role": message.role, "content": message.content})
                continue
            turn = self._turn(message.role, message.content, i, chat)
            if turn is not None:
                chat.append(turn)
        return chat

    def _turn(
        self, role: str, blocks: list[Block], i: int, chat: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """One message's blocks as a chat message (tool results go before it, as their
        own tool messages); None for a user turn of tool results only."""
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for j, block in enumerate(blocks):
            if block.type == "text" and block.text:
                parts.append({"type": "text", "text": block.text})
            elif block.type == "image" and block.source is not None:
                # the part's index once the message is placed, named back to its block
                self.names.add(
                    f"messages[{len(chat)}].content[{len(parts)}].image_url",
                    f"messages[{i}].content[{j}].source",
                )
                parts.append({"type": "image_url", "image_url": {"url": block.source.as_url()}})
            elif block.type == "thinking" and block.thinking is not None:
                reasoning.append(block.thinking)
            elif block.type == "tool_use":
                calls.append(
                    {
                        "id": block.id or f"call_{uuid.uuid4().hex[:24]}",
                        "type": "function",
                        "function": {"name": block.name, "arguments": json.dumps(block.input or {})},
                    }
                )
            elif block.type == "tool_result" and role == "user":
                self._tool_result(block, i, j, chat)
            elif block.type == "tool_result":
                parts.append({"type": "text", "text": f"Tool result: {block.content or ''}"})
        # redacted_thinking is opaque: accepted (a client echoes it back), not shown to the model
        turn: dict[str, Any] = {"role": role}
        if reasoning:
            turn["reasoning"] = "".join(reasoning)
        if calls:
            turn["tool_calls"] = calls
        if len(parts) == 1 and parts[0]["type"] == "text":
            turn["content"] = parts[0]["text"]
        elif parts:
            turn["content"] = parts
        if role == "user" and "content" not in turn:
            return None
        self.names.add(f"messages[{len(chat)}]", f"messages[{i}]")
        return turn

    def _tool_result(self, block: Block, i: int, j: int, chat: list[dict[str, Any]]) -> None:
        """A user's tool_result: a tool message with its text, then a user message with its images."""
        texts, images = [], []
        content = block.content
        for k, item in enumerate(content if isinstance(content, list) else []):
            if item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif item.get("type") == "image":
                try:
                    source = ImageSource.model_validate(item.get("source"))
                except ValidationError as error:
                    failure = invalid(error)
                    field = f"messages[{i}].content[{j}].content[{k}].source"
                    raise ServiceError(f"{field}: {failure.message}", "invalid_request", field) from None
                images.append((k, source.as_url()))
        text = content if isinstance(content, str) else "\n".join(texts)
        self.names.add(f"messages[{len(chat)}]", f"messages[{i}].content[{j}]")
        chat.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text or ""})
        if images:
            for n, (k, _) in enumerate(images):
                self.names.add(
                    f"messages[{len(chat)}].content[{n}].image_url",
                    f"messages[{i}].content[{j}].content[{k}].source",
                )
            chat.append(
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": url}} for _, url in images],
                }
            )


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def _text_of(content: str | list[Block] | None) -> str:
    """A system prompt's text: the string, or its text blocks joined (vLLM's join), without
    Claude Code's billing header, whose per-request hash would defeat prefix caching (vLLM
    drops it too)."""
    texts = (
        [content or ""]
        if content is None or isinstance(content, str)
        else [block.text for block in content if block.type == "text" and block.text]
    )
    return "".join(text for text in texts if not text.startswith(BILLING_HEADER))
