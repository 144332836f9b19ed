"""Engine outputs to OpenAI objects: chat.completion, chat.completion.chunk, text_completion,
SSE lines.

The answer's parts (app/mmprep/derender's Deltas) as OpenAI puts them: content, the reasoning
as vLLM 0.33 names it (`reasoning`) and as DeepSeek and older vLLM did
(`reasoning_content`), both sent, so that every client finds it; tool calls streamed as
OpenAI streams them (a chunk that names the call and its id with empty arguments, then
chunks that add to the arguments, as they are written); vLLM's `stop_reason` beside `finish_reason`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...derender import Delta


def sse(payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


SSE_DONE = sse("[DONE]")


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def text_choice(index: int, text: str, logprobs: dict | None, finish_reason: str | None, stop_reason) -> dict:
    """A choice of a text_completion (OpenAI's legacy completions, vLLM's stop_reason beside)."""
    return {
        "index": index,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": finish_reason,
        "stop_reason": stop_reason,
    }


def text_completion(
    request_id: str, model: str, created: int, choices: list, usage_: dict | None = None
) -> dict:
    """A text_completion, whole or one streamed chunk of it (no usage: a chunk's)."""
    body = {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if usage_ is not None:
        body["usage"] = usage_
    return body


class CompletionBuilder:
    """Builds the response objects of one request: same id, model and creation time."""

    def __init__(self, request_id: str, model: str, include_usage: bool = False):
        # The completion's id, as vLLM makes it from a client's X-Request-Id.
        self.request_id = request_id if request_id.startswith("chatcmpl-") else f"chatcmpl-{request_id}"
        self.model, self.created = model, int(time.time())
        self.include_usage = include_usage

    def completion(self, text: str, finish_reason: str, usage_: dict) -> dict:
        return {
            "id": self.request_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage_,
        }

    def answer(self, answer: Answer, finish_reason: str, stop_reason, usage_: dict) -> dict:
        """The chat.completion of a whole answer, parts and all."""
        completion = self.completion(answer.text(), finish_reason, usage_)
        choice = completion["choices"][0]
        choice["message"] = answer.message()
        choice["logprobs"] = None if answer.logprobs is None else {"content": answer.logprobs}
        choice["stop_reason"] = stop_reason
        return completion

    def chunk(
        self, delta: dict, finish_reason: str | None = None, logprobs: list | None = None, **choice_fields
    ) -> dict:
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": None if logprobs is None else {"content": logprobs},
            "finish_reason": finish_reason,
            **choice_fields,
        }
        chunk = self._chunk([choice])
        if self.include_usage:
            chunk["usage"] = None  # as OpenAI: null on every chunk but the last
        return chunk

    def delta_chunks(self, delta: Delta) -> list[dict]:
        """The chunks one step of the answer makes (none if it added nothing)."""
        chunks, logprobs = [], delta.logprobs or None
        text = {}
        if delta.reasoning:
            text["reasoning"] = text["reasoning_content"] = delta.reasoning
        if delta.content:
            text["content"] = delta.content
        if text or logprobs:
            chunks.append(self.chunk(text, logprobs=logprobs))
        for call in delta.tool_calls:
            if call.id is not None:  # the call's first delta: its own chunk, arguments empty
                named = {
                    "index": call.index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                chunks.append(self.chunk({"tool_calls": [named]}))
            if call.arguments:
                added = {"index": call.index, "function": {"arguments": call.arguments}}
                chunks.append(self.chunk({"tool_calls": [added]}))
        return chunks

    def usage_chunk(self, usage_: dict) -> dict:
        return {**self._chunk([]), "usage": usage_}

    def _chunk(self, choices: list) -> dict:
        return {
            "id": self.request_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }


class Answer:
    """A whole answer put together from its steps: what a non-streamed reply holds, and
    what a stream's steps add up to."""

    def __init__(self, reasoning: bool = False, logprobs: bool = False):
        self._content: list[str] = []
        self._reasoning: list[str] | None = [] if reasoning else None  # None: no reasoning parser
        self.tool_calls: list[dict] = []  # by index: id, name and the arguments' pieces
        self.logprobs: list | None = [] if logprobs else None

    def add(self, delta: Delta) -> None:
        if delta.content:
            self._content.append(delta.content)
        if delta.reasoning and self._reasoning is not None:
            self._reasoning.append(delta.reasoning)
        for call in delta.tool_calls:
            if call.id is not None:
                self.tool_calls.append({"id": call.id, "name": call.name, "arguments": []})
            self.tool_calls[call.index]["arguments"].append(call.arguments)
        if delta.logprobs and self.logprobs is not None:
            self.logprobs.extend(delta.logprobs)

    def text(self) -> str:
        return "".join(self._content)

    def message(self) -> dict:
        text = self.text()
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self._reasoning is not None:
            reasoning = "".join(self._reasoning) or None
            message["content"] = text or None
            message["reasoning"] = message["reasoning_content"] = reasoning
        if self.tool_calls:
            message["content"] = text or None
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                }
                for call in self.tool_calls
            ]
        return message
