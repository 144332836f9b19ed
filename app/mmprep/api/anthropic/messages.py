"""POST /v1/messages: Anthropic's Messages API as vLLM 0.33 serves it, through the chat pipeline.

The request becomes the chat request vLLM's AnthropicServingMessages makes of it
(common/messages_protocol.py), and the chat answer becomes Anthropic's: thinking, text and
tool_use blocks, stop_reason, usage; streamed as Anthropic's events. Errors are Anthropic's
`{"type": "error", "error": {"type", "message"}}`, the message naming the field.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...core.errors import ServiceError
from ..common.chat_answers import sse
from ..common.messages_protocol import MessagesToChat, error_type


class MessagesApi(MessagesToChat):
    """One /v1/messages request: its chat request (MessagesToChat), and its answer, events
    and errors."""

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
