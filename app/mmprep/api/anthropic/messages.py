"""POST /v1/messages: Anthropic's Messages API as vLLM 0.33 serves it, through the chat pipeline.

The request becomes the chat request vLLM's AnthropicServingMessages makes of it (system
text first; text and image blocks as parts; tool_use blocks as the assistant's tool calls;
tool_result blocks as tool messages before the user's turn; thinking blocks as the turn's
reasoning), and the chat answer becomes Anthropic's: thinking, text and tool_use blocks,
stop_reason, usage; streamed as Anthropic's events. Errors are Anthropic's
`{"type": "error", "error": {"type", "message"}}`, the message naming the field.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...core.errors import ServiceError
from ...media.data_url import DataURL
from ..openai.chat_answers import sse
from ..openai.chat_protocol import ChatCompletionRequest, parse_chat_request
from ..translation import FieldError, FieldNames, body_object, invalid

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


class MessagesApi:
    """One /v1/messages request: its chat request, and its answer, events and errors."""

    def __init__(self) -> None:
        self.names = FieldNames()

    # -- the request -----------------------------------------------------------------

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

    # -- the answer ------------------------------------------------------------------

    def whole(self, completion: dict) -> dict:
        choice = completion["choices"][0]
        message = choice["message"]
        content: list[dict[str, Any]] = []
        if message.get("reasoning"):
            content.append(
                {"type": "thinking", "thinking": message["reasoning"], "signature": uuid.uuid4().hex}
            )
        if message.get("content"):
            content.append({"type": "text", "text": message["content"]})
        calls = message.get("tool_calls") or []
        complete = True
        for call in calls:
            arguments = _object_or_none(call["function"]["arguments"])
            complete = complete and arguments is not None
            content.append(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": arguments or {},
                }
            )
        stop_reason, stop_sequence = stop_reason_of(
            choice["finish_reason"], choice.get("stop_reason"), bool(calls), bool(calls) and complete
        )
        answer = {
            "id": completion["id"],
            "type": "message",
            "role": "assistant",
            "content": content or [{"type": "text", "text": ""}],  # Anthropic's empty answer
            "model": completion["model"],
            "stop_reason": stop_reason,
            "usage": _usage(completion["usage"]),
        }
        if stop_sequence is not None:
            answer["stop_sequence"] = stop_sequence
        return answer

    def events(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        return _Events(self.error_body).of(chunks)

    def error_body(self, failure: ServiceError) -> dict:
        message, param = self.names.said_back(failure)
        if param and param not in message:
            message = f"{param}: {message}"
        return {"type": "error", "error": {"type": error_type(failure.status), "message": message}}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def stop_reason_of(
    finish_reason: str | None, stop_reason: Any, tool_used: bool, tool_complete: bool
) -> tuple[str | None, str | None]:
    """Anthropic's (stop_reason, stop_sequence), as vLLM's _to_anthropic_stop_reason: a cut
    answer is max_tokens; complete tool calls are tool_use; a matched stop string names itself."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason not in ("stop", "tool_calls"):
        return None, None
    if tool_complete:
        return "tool_use", None
    if isinstance(stop_reason, str):
        return "stop_sequence", stop_reason
    if finish_reason == "tool_calls" or tool_used:
        return "tool_use", None
    return "end_turn", None


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


def _object_or_none(arguments: str) -> dict | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _usage(chat_usage: dict | None) -> dict[str, int]:
    chat_usage = chat_usage or {}
    return {
        "input_tokens": chat_usage.get("prompt_tokens", 0),
        "output_tokens": chat_usage.get("completion_tokens", 0),
    }


def _event(payload: dict) -> str:
    return f"event: {payload['type']}\n{sse(payload)}"


class _Events:
    """The chat stream as Anthropic's events, as vLLM's message_stream_converter: one
    block open at a time (thinking, text or tool_use), each opened by content_block_start
    and closed by content_block_stop (a thinking block's signature_delta first); text
    that comes while a tool_use block is open waits until it closes."""

    def __init__(self, error_body: Callable[[ServiceError], dict]) -> None:
        self.error_body = error_body
        self.index = 0  # the next block's
        self.open: str | None = None  # the open block's type
        self.signature: str | None = None
        self.call_id: str | None = None
        self.ids: dict[int, str] = {}  # a chat tool call's index -> its id
        self.pending: list[str] = []
        self.finish_reason: str | None = None
        self.stop_reason: Any = None
        self.tool_used = False
        self.last_arguments: list[str] = []

    async def of(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        first = True
        async for chunk in chunks:
            if isinstance(chunk, ServiceError):
                for event in self._stop():
                    yield event
                yield _event(self.error_body(chunk))
                return
            if first:
                first = False
                yield _event(_message_start(chunk))
                continue
            for event in self._chunk(chunk):
                yield event
        for event in self._flush():
            yield event
        yield _event({"type": "message_stop"})

    def _chunk(self, chunk: dict) -> list[str]:
        if not chunk["choices"]:  # the usage chunk: the answer is over
            tool_complete = self.tool_used and _object_or_none("".join(self.last_arguments)) is not None
            stop_reason, stop_sequence = stop_reason_of(
                self.finish_reason or "stop", self.stop_reason, self.tool_used, tool_complete
            )
            delta = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
            return [
                *self._flush(),
                _event({"type": "message_delta", "delta": delta, "usage": _usage(chunk["usage"])}),
            ]
        choice = chunk["choices"][0]
        if choice["finish_reason"] is not None:
            self.finish_reason, self.stop_reason = choice["finish_reason"], choice.get("stop_reason")
        delta, events = choice["delta"], []
        if delta.get("reasoning"):
            events += self._into("thinking", {"type": "thinking", "thinking": ""})
            events.append(self._delta({"type": "thinking_delta", "thinking": delta["reasoning"]}))
        if delta.get("content"):
            if self.open == "tool_use":
                self.pending.append(delta["content"])
            else:
                events += self._into("text", {"type": "text", "text": ""})
                events.append(self._delta({"type": "text_delta", "text": delta["content"]}))
        for call in delta.get("tool_calls") or ():
            events += self._tool_call(call)
        return events

    def _tool_call(self, call: dict) -> list[str]:
        events = []
        if call.get("id") is not None:
            self.ids[call["index"]] = call["id"]
            if self.call_id != call["id"]:
                events += self._flush()
                self.tool_used, self.last_arguments = True, []
                block = {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": {}}
                events.append(self._start(block))
                self.call_id = call["id"]
        arguments = call.get("function", {}).get("arguments")
        if arguments and self.ids.get(call["index"]) == self.call_id:
            self.last_arguments.append(arguments)
            events.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return events

    def _into(self, kind: str, block: dict) -> list[str]:
        """The events that make `kind` the open block."""
        if self.open == kind:
            return []
        return [*self._flush(), self._start(block)]

    def _start(self, block: dict) -> str:
        self.open = block["type"]
        self.signature = uuid.uuid4().hex if self.open == "thinking" else None
        return _event({"type": "content_block_start", "index": self.index, "content_block": block})

    def _delta(self, delta: dict) -> str:
        return _event({"type": "content_block_delta", "index": self.index, "delta": delta})

    def _stop(self) -> list[str]:
        if self.open is None:
            return []
        events = []
        if self.signature is not None:
            events.append(self._delta({"type": "signature_delta", "signature": self.signature}))
        events.append(_event({"type": "content_block_stop", "index": self.index}))
        self.open, self.signature, self.call_id = None, None, None
        self.index += 1
        return events

    def _flush(self) -> list[str]:
        """Close the open block; text held back while a tool_use block was open is a text block of its own."""
        pending, self.pending = "".join(self.pending), []
        events = self._stop()
        if pending:
            events.append(self._start({"type": "text", "text": ""}))
            events.append(self._delta({"type": "text_delta", "text": pending}))
            events += self._stop()
        return events


def _message_start(chunk: dict) -> dict:
    message = {
        "id": chunk["id"],
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": chunk["model"],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    return {"type": "message_start", "message": message}
