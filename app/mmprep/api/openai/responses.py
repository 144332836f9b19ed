"""POST /v1/responses: OpenAI's Responses API as vLLM 0.33 serves it (its non-harmony path),
through the chat pipeline.

The request becomes the chat request vLLM's construct_input_messages makes of it
(instructions as the system message; a string input as the user's turn; message items with
their text and image parts; function_call items as the assistant's tool calls, merged into
the turn before; function_call_output items as tool messages; reasoning items as the
turn's reasoning). The chat answer becomes output items (reasoning, message,
function_call), streamed as the semantic events of vLLM's SimpleStreamingEventProcessor:
one item open at a time, each with its added / delta / done events, all numbered by
`sequence_number`. Nothing is stored: `previous_response_id` and `background` are refused.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...core.errors import ServiceError
from ..translation import FieldError, FieldNames, body_object, invalid
from .chat_answers import sse
from .chat_protocol import ChatCompletionRequest, parse_chat_request

# the content parts a message item may hold, as the chat part each becomes (mmprep's own
# image_url and video_url parts are taken too: a video has no Responses part of its own)
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
IMAGE_PARTS = frozenset({"input_image", "image_url"})


# OpenAI's fields about storage, caching and accounting that change nothing of the answer
# here: read and dropped, not passed on (an engine that takes only its own fields would refuse them)
DROPPED = frozenset({"include", "service_tier", "prompt_cache_key", "safety_identifier", "max_tool_calls"})


class FunctionTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunction(BaseModel):
    type: Literal["function"]
    name: str


class Reasoning(BaseModel):
    model_config = ConfigDict(extra="allow")

    effort: str | None = None
    summary: str | None = None


class ResponsesRequest(BaseModel):
    """The request as vLLM's ResponsesRequest types the fields mmprep serves; other fields
    go on to the chat request as they came, as a chat request's extra fields do."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    tools: list[FunctionTool] = []
    tool_choice: Literal["auto", "none", "required"] | NamedFunction = "auto"
    parallel_tool_calls: bool = True
    reasoning: Reasoning | None = None
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool = True  # accepted, and nothing stored (vLLM's default, without its store)
    previous_response_id: str | None = None
    background: bool = False
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] = "disabled"
    chat_template_kwargs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _served(self) -> ResponsesRequest:
        if self.previous_response_id is not None:
            raise FieldError(
                "previous_response_id",
                "this server stores no responses: send the whole conversation as input",
            )
        if self.background:
            raise FieldError(
                "background", "this server stores no responses, so it runs none in the background"
            )
        fmt = (self.text or {}).get("format")
        if isinstance(fmt, dict) and fmt.get("type", "text") != "text":
            raise FieldError("text.format", "structured outputs are not applied by this server: ask for text")
        return self


class ResponsesApi:
    """One /v1/responses request: its chat request, and its answer, events and errors."""

    def __init__(self) -> None:
        self.names = FieldNames()
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.request: ResponsesRequest | None = None

    # -- the request -----------------------------------------------------------------

    def chat_request(self, document: Any) -> ChatCompletionRequest:
        return parse_chat_request(self.chat_document_of(document))

    def chat_document_of(self, document: Any) -> dict[str, Any]:
        """The JSON body as the chat request's JSON (what /v1/responses/render renders too)."""
        try:
            request = ResponsesRequest.model_validate(body_object(document, "a responses request"))
        except ValidationError as error:
            raise invalid(error) from None
        self.request = request
        return self.chat_document(request)

    def chat_document(self, request: ResponsesRequest) -> dict[str, Any]:
        extra = {name: value for name, value in (request.model_extra or {}).items() if name not in DROPPED}
        chat: dict[str, Any] = {
            **extra,
            "model": request.model,
            "messages": self._messages(request),
            "stream": request.stream,
        }
        if request.stream:
            chat["stream_options"] = {"include_usage": True}  # response.completed carries the usage
        if request.max_output_tokens is not None:
            chat["max_tokens"] = request.max_output_tokens
            self.names.add("max_completion_tokens", "max_output_tokens")
            self.names.add("max_tokens", "max_output_tokens")
        for field in ("temperature", "top_p", "top_k", "user", "chat_template_kwargs"):
            if getattr(request, field) is not None:
                chat[field] = getattr(request, field)
        if request.reasoning is not None and request.reasoning.effort is not None:
            chat["reasoning_effort"] = request.reasoning.effort
            self.names.add("reasoning_effort", "reasoning.effort")
        if request.tools:
            chat["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            for i in range(len(request.tools)):
                self.names.add(f"tools[{i}].function", f"tools[{i}]")
            choice = request.tool_choice
            chat["tool_choice"] = (
                choice if isinstance(choice, str) else {"type": "function", "function": {"name": choice.name}}
            )
            chat["parallel_tool_calls"] = request.parallel_tool_calls
        return chat

    def _messages(self, request: ResponsesRequest) -> list[dict[str, Any]]:
        chat: list[dict[str, Any]] = []
        if request.instructions:
            chat.append({"role": "system", "content": request.instructions})
        if isinstance(request.input, str):
            self.names.add(f"messages[{len(chat)}]", "input")
            chat.append({"role": "user", "content": request.input})
            return chat
        for i, item in enumerate(request.input):
            self._item(item, f"input[{i}]", chat)
        if not chat:
            raise ServiceError("input: must hold at least one message", "invalid_request", "input")
        return chat

    def _item(self, item: dict[str, Any], where: str, chat: list[dict[str, Any]]) -> None:
        """One input item into the chat messages, as vLLM's _construct_message_from_response_item."""
        kind = item.get("type", "message" if "role" in item else None)
        last = chat[-1] if chat and chat[-1]["role"] == "assistant" else None
        if kind == "function_call":
            call = {
                "id": _string(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _string(item, "name", where),
                    "arguments": _string(item, "arguments", where),
                },
            }
            if last is not None:
                last.setdefault("tool_calls", []).append(call)
            else:
                chat.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _texts(output, f"{where}.output")
            chat.append({"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": text})
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            reasoning = _texts(parts[:1], f"{where}.content") if isinstance(parts, list) else ""
            if last is not None and "reasoning" not in last:
                last["reasoning"] = reasoning
            else:
                chat.append({"role": "assistant", "reasoning": reasoning})
        elif kind == "message":
            self._message(item, where, chat, last)
        else:
            raise ServiceError(
                f"{where}.type: {kind!r} is not an input item this server takes "
                "(message, function_call, function_call_output, reasoning)",
                "invalid_request",
                f"{where}.type",
            )

    def _message(
        self, item: dict[str, Any], where: str, chat: list[dict[str, Any]], last: dict[str, Any] | None
    ) -> None:
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise ServiceError(
                f"{where}.role: must be user, system, developer or assistant",
                "invalid_request",
                f"{where}.role",
            )
        content = item.get("content")
        if role == "assistant":  # its text (vLLM keeps the first part's), merged into the turn before
            text = content if isinstance(content, str) else _texts(content, f"{where}.content")
            if last is not None and last.get("content") is None:
                last["content"] = text
            else:
                chat.append({"role": "assistant", "content": text})
            return
        self.names.add(f"messages[{len(chat)}]", where)
        if isinstance(content, str):
            chat.append({"role": role, "content": content})
            return
        if not isinstance(content, list):
            raise ServiceError(
                f"{where}.content: must be a string or a list of parts", "invalid_request", f"{where}.content"
            )
        chat.append(
            {
                "role": role,
                "content": [self._part(part, f"{where}.content[{j}]") for j, part in enumerate(content)],
            }
        )

    def _part(self, part: Any, where: str) -> dict[str, Any]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            return {"type": "text", "text": part["text"]}
        if kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url:
                what = (
                    "file_id images are not taken (nothing is uploaded here)"
                    if "file_id" in part
                    else "needs its image_url"
                )
                raise ServiceError(f"{where}.image_url: {what}", "invalid_content_part", f"{where}.image_url")
            return {"type": "image_url", "image_url": {"url": url}}
        if kind in ("image_url", "video_url"):
            return part
        raise ServiceError(
            f"{where}: a part of type {kind!r} is not taken here (input_text, input_image)",
            "invalid_content_part",
            where,
        )

    # -- the answer ------------------------------------------------------------------

    def whole(self, completion: dict) -> dict:
        choice = completion["choices"][0]
        message, finish = choice["message"], choice["finish_reason"]
        status = _status(finish)
        items: list[dict[str, Any]] = []
        if message.get("reasoning"):
            items.append(_reasoning_item(f"rs_{uuid.uuid4().hex}", message["reasoning"], None))
        calls = message.get("tool_calls") or []
        if message.get("content"):
            items.append(
                _message_item(f"msg_{uuid.uuid4().hex}", message["content"], "completed" if calls else status)
            )
        for n, call in enumerate(calls):
            function = call["function"]
            last = n == len(calls) - 1
            items.append(
                _call_item(
                    f"fc_{uuid.uuid4().hex}",
                    call["id"],
                    function["name"],
                    function["arguments"],
                    status if last else "completed",
                )
            )
        return self.response(items, status, completion["usage"])

    def response(self, output: list[dict[str, Any]], status: str, chat_usage: dict | None) -> dict[str, Any]:
        """The response object, as vLLM's ResponsesResponse.from_request fills it."""
        request = self.request
        assert request is not None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": request.instructions,
            "metadata": request.metadata,
            "model": request.model,
            "output": output,
            "parallel_tool_calls": request.parallel_tool_calls,
            "temperature": request.temperature if request.temperature is not None else 1.0,
            "tool_choice": request.tool_choice
            if isinstance(request.tool_choice, str)
            else request.tool_choice.model_dump(),
            "tools": [tool.model_dump() for tool in request.tools],
            "top_p": request.top_p if request.top_p is not None else 1.0,
            "background": False,
            "max_output_tokens": request.max_output_tokens,
            "previous_response_id": None,
            "reasoning": request.reasoning.model_dump() if request.reasoning else None,
            "service_tier": "auto",
            "text": request.text,
            "truncation": request.truncation,
            "user": request.user,
            "usage": None if chat_usage is None else _usage(chat_usage),
        }

    def events(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        return _Events(self).of(chunks)

    def error_body(self, failure: ServiceError) -> dict:
        message, param = self.names.said_back(failure)
        body = failure.body()
        body["error"].update(message=message, param=param)
        return body


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise ServiceError(f"{where}.{key}: must be a string", "invalid_request", f"{where}.{key}")
    return value


def _texts(parts: Any, where: str) -> str:
    """The text of a list of text parts, joined."""
    if not isinstance(parts, list):
        raise ServiceError(f"{where}: must be a string or a list of text parts", "invalid_request", where)
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise ServiceError(f"{where}[{j}]: must be a text part", "invalid_content_part", f"{where}[{j}]")
        texts.append(part["text"])
    return "".join(texts)


def _status(finish_reason: str | None) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def _usage(chat_usage: dict) -> dict[str, Any]:
    return {
        "input_tokens": chat_usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": chat_usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chat_usage["total_tokens"],
    }


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [part] if text else [],
    }


def _reasoning_item(item_id: str, text: str, status: str | None) -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}]
    return {"id": item_id, "type": "reasoning", "summary": [], "content": content, "status": status}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


class _Events:
    """The chat stream as the Responses API's events: one output item open at a time (a
    message, a reasoning item or a function call), opened, added to and closed as vLLM's
    SimpleStreamingEventProcessor does, every event numbered in order."""

    def __init__(self, api: ResponsesApi) -> None:
        self.api = api
        self.number = 0
        self.open: str | None = None  # "content", "reasoning" or "call"
        self.item_id = ""
        self.text: list[str] = []
        self.call: dict[str, Any] = {}
        self.output: list[dict[str, Any]] = []
        self.finish_reason: str | None = None

    def _event(self, kind: str, **fields: Any) -> str:
        payload = {"type": kind, "sequence_number": self.number, **fields}
        self.number += 1
        return f"event: {kind}\n{sse(payload)}"

    async def of(self, chunks: AsyncIterator[dict | ServiceError]) -> AsyncIterator[str]:
        started = self.api.response([], "in_progress", None)
        yield self._event("response.created", response=started)
        yield self._event("response.in_progress", response=started)
        usage: dict | None = None
        async for chunk in chunks:
            if isinstance(chunk, ServiceError):
                error = self.api.error_body(chunk)["error"]
                yield self._event("error", code=error["code"], message=error["message"], param=error["param"])
                return
            if not chunk["choices"]:
                usage = chunk["usage"]
                continue
            for event in self._chunk(chunk["choices"][0]):
                yield event
        status = _status(self.finish_reason)
        for event in self._close(status):
            yield event
        final = self.api.response(self.output, status, usage)
        yield self._event(
            "response.incomplete" if status == "incomplete" else "response.completed", response=final
        )

    def _chunk(self, choice: dict) -> list[str]:
        if choice["finish_reason"] is not None:
            self.finish_reason = choice["finish_reason"]
        delta, events = choice["delta"], []
        if delta.get("reasoning"):
            events += self._into("reasoning", self._open_reasoning)
            events.append(self._text_delta("response.reasoning_text.delta", delta["reasoning"]))
        if delta.get("content"):
            events += self._into("content", self._open_content)
            events.append(self._text_delta("response.output_text.delta", delta["content"], logprobs=[]))
        for call in delta.get("tool_calls") or ():
            if call.get("id") is not None:
                events += self._close()
                events += self._open_call(call)
            arguments = call.get("function", {}).get("arguments")
            if arguments and self.open == "call":
                self.text.append(arguments)
                events.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        output_index=len(self.output),
                        item_id=self.item_id,
                        delta=arguments,
                    )
                )
        return events

    def _into(self, kind: str, opener: Callable[[], list[str]]) -> list[str]:
        if self.open == kind:
            return []
        return [*self._close(), *opener()]

    def _begin(self, kind: str, prefix: str) -> None:
        self.open, self.item_id, self.text = kind, f"{prefix}_{uuid.uuid4().hex}", []

    def _open_content(self) -> list[str]:
        self._begin("content", "msg")
        item = {
            "id": self.item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [self._added(item), self._part("response.content_part.added", part)]

    def _open_reasoning(self) -> list[str]:
        self._begin("reasoning", "rs")
        item = {"id": self.item_id, "type": "reasoning", "summary": [], "status": "in_progress"}
        return [
            self._added(item),
            self._part("response.content_part.added", {"type": "reasoning_text", "text": ""}),
        ]

    def _open_call(self, call: dict) -> list[str]:
        self._begin("call", "fc")
        self.call = {"call_id": call["id"], "name": call["function"]["name"]}
        return [self._added(_call_item(self.item_id, call["id"], self.call["name"], "", "in_progress"))]

    def _added(self, item: dict) -> str:
        return self._event("response.output_item.added", output_index=len(self.output), item=item)

    def _part(self, kind: str, part: dict) -> str:
        return self._event(
            kind, output_index=len(self.output), item_id=self.item_id, content_index=0, part=part
        )

    def _text_delta(self, kind: str, text: str, **fields: Any) -> str:
        self.text.append(text)
        return self._event(
            kind, output_index=len(self.output), item_id=self.item_id, content_index=0, delta=text, **fields
        )

    def _close(self, status: str = "completed") -> list[str]:
        """The open item's done events (with `status`, the last item's), and the item kept."""
        if self.open is None:
            return []
        text, index = "".join(self.text), len(self.output)
        where = {"output_index": index, "item_id": self.item_id}
        if self.open == "content":
            item = _message_item(self.item_id, text, status)
            part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": [], "logprobs": None}
            events = [
                self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
                self._part("response.content_part.done", part),
            ]
        elif self.open == "reasoning":
            item = _reasoning_item(self.item_id, text, status)
            events = [
                self._event("response.reasoning_text.done", **where, content_index=0, text=text),
                self._part("response.content_part.done", {"type": "reasoning_text", "text": text}),
            ]
        else:
            item = _call_item(self.item_id, self.call["call_id"], self.call["name"], text, status)
            events = [
                self._event(
                    "response.function_call_arguments.done", **where, name=self.call["name"], arguments=text
                )
            ]
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        self.output.append(item)
        self.open = None
        return events
