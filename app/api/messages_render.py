"""POST /v1/messages/render: vLLM's render of an Anthropic Messages request
(entrypoints/scale_out/render/ render_messages_request): the request turned into the chat
request vLLM's /v1/messages serves (anthropic/serving.py to_chat_completion_request), then
rendered as the chat render renders it, so the GenerateRequest is the chat render's.

What is converted, as vLLM converts it: `system` (a string or text blocks, joined), each
message's blocks (text; image, base64 or url, as an image_url part; thinking as the
assistant's reasoning; tool_use as a tool call, its input dumped as the arguments; a user's
tool_result as a tool message, its images in a user message after it), `tools`
(input_schema as the parameters; tool_choice "auto" when tools come without one),
`tool_choice` (auto, any -> required, none, tool -> the named function),
`max_tokens`, `stop_sequences`, temperature, top_p, top_k, `thinking` disabled as
reasoning_effort "none", `chat_template_kwargs`. Not converted: tool_addition/tool_removal
blocks, output_config (a 400 naming them, not a silent drop).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from ..core.errors import ServiceError
from ..service import Service
from .render import render_chat_document
from .validation import validated


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
    return await render_chat_document(service, chat_document(request), http, cancel)


def chat_document(request: MessagesRequest) -> dict[str, Any]:
    """The chat request vLLM's to_chat_completion_request makes of `request`."""
    messages: list[dict[str, Any]] = []
    system = _system_text(request.system)
    if system:
        messages.append({"role": "system", "content": system})
    for index, message in enumerate(request.messages):
        messages += _converted(message, f"messages[{index}]")
    chat: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
    }
    optional = {
        "stop": request.stop_sequences,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "chat_template_kwargs": request.chat_template_kwargs,
        "cache_salt": request.cache_salt,
    }
    chat |= {name: value for name, value in optional.items() if value is not None}
    if request.stream:
        chat["stream"] = True
    if request.thinking is not None and request.thinking.type == "disabled":
        chat["reasoning_effort"] = "none"
    if request.tool_choice is not None:
        choice = request.tool_choice
        chat["parallel_tool_calls"] = not choice.disable_parallel_tool_use
        named = {"type": "function", "function": {"name": choice.name}}
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none", "tool": named}[choice.type]
    if request.tools is not None:
        chat["tools"] = [_tool(tool) for tool in request.tools]
        chat.setdefault("tool_choice", "auto")
    return chat


def _system_text(system: str | list[dict[str, Any]] | None) -> str:
    if not system:
        return ""
    if isinstance(system, str):
        return system
    return "".join(
        block["text"]
        for block in system
        if block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"]
        and not block["text"].startswith("x-anthropic-billing-header")  # vLLM drops Claude Code's header
    )


def _converted(message: AnthropicMessage, where: str) -> list[dict[str, Any]]:
    """The chat messages one Anthropic message becomes (a user's tool results come first,
    as vLLM appends them while it reads the blocks)."""
    if message.role == "system":
        text = message.content if isinstance(message.content, str) else _system_text(message.content)
        return [{"role": "system", "content": text}] if text else []
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    before: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for number, block in enumerate(message.content):
        _block(block, message.role, parts, calls, reasoning, before, f"{where}.content[{number}]")
    chat: dict[str, Any] = {"role": message.role}
    if reasoning:
        chat["reasoning"] = "".join(reasoning)
    if calls:
        chat["tool_calls"] = calls
    if parts:
        chat["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    elif not calls and not reasoning:
        return before
    if message.role == "user" and "content" not in chat:
        return before
    return [*before, chat]


def _block(
    block: dict[str, Any],
    role: str,
    parts: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    reasoning: list[str],
    before: list[dict[str, Any]],
    where: str,
) -> None:
    kind = block.get("type")
    if kind == "text":
        if block.get("text"):
            parts.append({"type": "text", "text": block["text"]})
    elif kind == "image":
        if block.get("source"):
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block["source"], where)}})
    elif kind == "thinking":
        if block.get("thinking") is not None:
            reasoning.append(str(block["thinking"]))
    elif kind == "tool_use":
        calls.append(
            {
                "id": block.get("id") or f"call_{int(time.time())}",
                "type": "function",
                "function": {
                    "name": block.get("name") or "",
                    "arguments": json.dumps(block.get("input") or {}),
                },
            }
        )
    elif kind == "tool_result":
        if role == "user":
            before += _tool_result(block, where)
        else:
            parts.append({"type": "text", "text": f"Tool result: {block.get('content') or ''}"})
    elif kind in ("redacted_thinking", "tool_reference"):
        pass  # vLLM accepts and skips them
    else:
        raise ServiceError(
            f"{where}.type: {kind!r} is not a content block this server renders "
            "(text, image, thinking, redacted_thinking, tool_use, tool_result)",
            "invalid_request",
            f"{where}.type",
        )


def _tool_result(block: dict[str, Any], where: str) -> list[dict[str, Any]]:
    content = block.get("content")
    text, images = "", []
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                texts.append(item.get("text", ""))
            elif isinstance(item, dict) and item.get("type") == "image":
                images.append(_image_url(item.get("source") or {}, where))
        text = "\n".join(texts)
    out = [{"role": "tool", "tool_call_id": block.get("tool_use_id") or "", "content": text}]
    if images:
        out.append(
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}} for url in images]}
        )
    return out


def _image_url(source: dict[str, Any], where: str) -> str:
    """vLLM's _convert_image_source_to_url: a url source as it is, else a data URL."""
    if not isinstance(source, dict):
        raise ServiceError(f"{where}.source: an object (base64 or url)", "invalid_request", f"{where}.source")
    if source.get("type") == "url":
        return str(source.get("url", ""))
    return f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"


def _tool(tool: AnthropicTool) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
    }
    if tool.strict is not None:
        function["strict"] = tool.strict
    if tool.defer_loading is not None:
        function["defer_loading"] = tool.defer_loading
    return {"type": "function", "function": function}
