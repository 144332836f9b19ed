"""POST /v1/responses: OpenAI's Responses API as vLLM 0.33 serves it (its non-harmony path),
through the chat pipeline.

The request becomes the chat request vLLM's construct_input_messages makes of it
(common/responses_protocol.py). The chat answer becomes output items (reasoning, message,
function_call), streamed as the semantic events of vLLM's SimpleStreamingEventProcessor:
one item open at a time, each with its added / delta / done events, all numbered by
`sequence_number`. Nothing is stored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...core.errors import ServiceError
from ..common.chat_answers import sse
from ..common.responses_protocol import ResponsesToChat


class ResponsesApi(ResponsesToChat):
    """One /v1/responses request: its chat request (ResponsesToChat), and its answer, events
    and errors."""

    def __init__(self) -> None:
        super().__init__()
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())

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
